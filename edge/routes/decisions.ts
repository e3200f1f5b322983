/**
 * POST /v1/systemone with an API key (runs in workerd): read the key and the model in one query
 * (edge/models.ts `keyAndModel`), validate once with the contract, bound the worst-case input tokens
 * (contract/budget.ts, no template needed), admit them against the account's quotas, and forward to
 * the sidecar that serves the model. Neither the request nor the
 * response body is logged or persisted here.
 *
 * A request with `images` is an image decision (edge/image-decision.ts) where IMAGE_API is on: the same
 * key and quota admission (its worst-case billable tokens reserved), then prepaid credit.
 */
import { Hono } from "hono";
import { requestTokenBound } from "../../contract/budget.ts";
import { decisionViolation } from "../../server-shared/decisions.ts";
import { DecisionRequest, type DecisionResponse } from "../../contract/decision.ts";
import { stringifyJson } from "../../contract/json.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { SIDECAR_PATHS, type SidecarDecideRequest } from "../../server-shared/sidecar-protocol.ts";
import { acceptKey, checkModelName, presentedKey, verifyKey } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { keyAndModel } from "../models.ts";
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
    const found = await c.var.timings.time("key-model", () => keyAndModel(services(c.env).sql, key.id, request.model));
    await acceptKey(c, key, found.key);
    checkModelName(c, request.model);
    const image = request.images !== undefined && services(c.env).settings.IMAGE_API === "on";
    const violation = image ? imageViolation(request) : decisionViolation(request);
    if (violation) throw violation;
    c.set("decision", request);
    c.set("reservedTokens", image ? imageWorstTokens(request) : requestTokenBound(request));
    c.set("model", found.model);
    await next();
  },
  quota(),
  async (c) => {
    const request = c.get("decision");
    const account = c.get("account");
    const resolved = c.get("model");
    if (request.images !== undefined) return imageDecision(c, { accountId: account.id, keyId: c.get("keyId"), request, resolved });
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
    };
    const answered = await decideOnSidecar(c, sidecarUrl, SIDECAR_PATHS.decide, stringifyJson(call), release.id);
    if (!answered.ok) return answered.response;
    const result = answered;
    const body: DecisionResponse = { model: release.id, answers: result.data.answers, usage: result.data.usage };
    // Written in order: answers as the questions came, probabilities as the options came.
    return orderedJson(c, body);
  },
);
