/**
 * POST /v1/systemone with an API key (runs in workerd): read the key and the model in one query
 * (edge/models.ts `keyAndModel`), validate once with the contract, bound the worst-case input tokens
 * (contract/budget.ts, no template needed), admit them against the account's quotas, and forward to
 * the sidecar that serves the model. Neither the request nor the
 * response body is logged or persisted here.
 *
 * A text decision whose key and model this isolate read lately is answered from what it kept
 * (auth/key-cache.ts) without that query: the secret is checked against the kept digest, and the
 * sidecar confirms the key and the model in Postgres while the passes run. When they no longer stand
 * (409 from the sidecar: nothing answered, nothing recorded), the key is read again here, so the
 * request gets the 401 of a revoked key or the answer of the release the model names now.
 *
 * A request with `images` is an image decision (edge/image-decision.ts) where IMAGE_API is on: the same
 * key and quota admission (its worst-case billable tokens reserved), then prepaid credit.
 */
import { Hono, type Context } from "hono";
import { requestTokenBound } from "../../contract/budget.ts";
import { decisionViolation } from "../../server-shared/decisions.ts";
import { DecisionRequest, type DecisionResponse } from "../../contract/decision.ts";
import { stringifyJson } from "../../contract/json.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { SIDECAR_PATHS, type SidecarDecideRequest } from "../../server-shared/sidecar-protocol.ts";
import { acceptKey, checkModelName, presentedKey, verifyKey } from "../auth/api-key.ts";
import { forgetKey, keepKey, keptKey } from "../auth/key-cache.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { keyAndModel, type Resolution } from "../models.ts";
import { services } from "../services.ts";
import { decideOnSidecar } from "../sidecar-call.ts";
import { imageDecision, imageViolation, imageWorstTokens } from "../image-decision.ts";

export const decisions = new Hono<AppEnv>();

decisions.post(
  "/v1/systemone",
  async (c, next) => {
    // The credential's shape first (no I/O), then the body, then the key and the model in one query.
    const key = presentedKey(c);
    let request: DecisionRequest;
    try {
      request = await readJson(c, DecisionRequest);
    } catch (err) {
      // A bad key is answered before a bad body, as on every API-key route.
      await verifyKey(c, key);
      throw err;
    }
    const image = request.images !== undefined && services(c.env).settings.IMAGE_API === "on";
    const kept = image ? null : keptKey(key.id, request.model);
    if (kept) await acceptKey(c, key, kept.key);
    c.set("keptKey", kept ? key : null);
    c.set("model", kept ? kept.model : await readKey(c, key, request.model, !image));
    checkModelName(c, request.model);
    const violation = image ? imageViolation(request) : decisionViolation(request);
    if (violation) throw violation;
    c.set("decision", request);
    c.set("reservedTokens", image ? imageWorstTokens(request) : requestTokenBound(request));
    await next();
  },
  quota(),
  async (c) => {
    const request = c.get("decision");
    const account = c.get("account");
    const resolved = c.get("model");
    if (request.images !== undefined) return imageDecision(c, { accountId: account.id, keyId: c.get("keyId"), request, resolved });
    const kept = c.get("keptKey");
    let answered: Response | "stale";
    try {
      answered = await forward(c, request, resolved, kept !== null);
    } catch (err) {
      // A kept sidecar address that cannot be reached (the release moved, the host is down): the
      // next request reads the key and the model again.
      if (kept) forgetKey(kept.id);
      throw err;
    }
    if (answered !== "stale") return answered;
    // The kept key or model no longer stands: read them again, as a request with nothing kept does.
    // The quota admitted this request already.
    forgetKey(kept!.id);
    const again = await forward(c, request, await readKey(c, kept!, request.model, true), false);
    if (again === "stale") throw new ServiceError("bad_gateway", "the model service answered malformed output"); // only a confirm is ever stale
    return again;
  },
);

/**
 * Reads the key and the model in one query and accepts the key (401 otherwise); keeps them for the
 * next requests when `keep` and the model is a text release a sidecar serves. The model's resolution,
 * null when the name resolves to none the account may use.
 */
async function readKey(c: Context<AppEnv>, key: { id: string; token: string }, model: string, keep: boolean): Promise<Resolution | null> {
  const found = await c.var.timings.time("key-model", () => keyAndModel(services(c.env).sql, key.id, model));
  const { expiresAt } = await acceptKey(c, key, found.key);
  if (keep && found.key && found.model?.modality === "text" && found.model.sidecarUrl) keepKey(key.id, model, found.key, found.model, expiresAt);
  return found.model;
}

/** The text decision forwarded to its release's sidecar (with `confirm` when the key and model were kept): the response, or "stale" when the sidecar found them no longer standing. */
async function forward(c: Context<AppEnv>, request: DecisionRequest, resolved: Resolution | null, confirm: boolean): Promise<Response | "stale"> {
  const account = c.get("account");
  if (!resolved) throw new ServiceError("model_not_found", "no model of that name is available to this account");
  if (resolved.modality === "image") {
    throw new ServiceError("model_not_found", `no text model of that name is available to this account: ${JSON.stringify(resolved.release.id)} reads images (send one as images: [{asset_id}])`);
  }
  const { release, sidecarUrl } = resolved;
  if (!sidecarUrl) {
    throw new ServiceError("unavailable", "this model is not being served right now; retry later", `release ${release.id} has no sidecar_url in the registry`);
  }

  const call: SidecarDecideRequest = {
    release,
    request: { state: request.state, questions: request.questions },
    account_id: account.id,
    key_id: c.get("keyId"),
    request_id: c.get("requestId"),
    ...(confirm ? { confirm: { model: request.model } } : {}),
  };
  const answered = await decideOnSidecar(c, sidecarUrl, SIDECAR_PATHS.decide, stringifyJson(call), release.id);
  if (answered.stale) return "stale";
  if (!answered.ok) return answered.response;
  const body: DecisionResponse = { model: release.id, answers: answered.data.answers, usage: answered.data.usage };
  // Written in order: answers as the questions came, probabilities as the options came.
  return orderedJson(c, body);
}
