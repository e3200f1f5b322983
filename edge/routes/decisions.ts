/**
 * POST /v1/systemone with an API key (runs in workerd): read the key and the model in one query
 * (edge/models.ts `keyAndModel`), validate once with the contract, bound the worst-case input tokens
 * (contract/budget.ts, no template needed), admit them against the account's quotas, and forward to
 * the sidecar that serves the model. Neither the request nor the
 * response body is logged or persisted here.
 */
import { Hono } from "hono";
import { requestTokenBound } from "../../contract/budget.ts";
import { decisionViolation } from "../../server-shared/decisions.ts";
import { DecisionRequest, type DecisionResponse } from "../../contract/decision.ts";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { parseJson, stringifyJson, type Json } from "../../contract/json.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { SERVER_TIMING_HEADER, Timings } from "../../server-shared/timing.ts";
import { SIDECAR_PATHS, SidecarDecideResponse, type SidecarDecideRequest } from "../../server-shared/sidecar-protocol.ts";
import { acceptKey, presentedKey, verifyKey } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { keyAndModel } from "../models.ts";
import { services, sidecarFetch } from "../services.ts";

export const decisions = new Hono<AppEnv>();

function parseOrUndefined(text: string): Json | undefined {
  try {
    return parseJson(text);
  } catch {
    return undefined;
  }
}

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
    const violation = decisionViolation(request);
    if (violation) throw violation;
    c.set("decision", request);
    c.set("reservedTokens", requestTokenBound(request));
    c.set("model", found.model);
    await next();
  },
  quota(),
  async (c) => {
    const { settings } = services(c.env);
    const request = c.get("decision");
    const account = c.get("account");
    const timings = c.var.timings;
    const resolved = c.get("model");
    if (!resolved) throw new ServiceError("model_not_found", "no model of that name is available to this account");
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
    const sidecarStarted = performance.now();
    let res: Response;
    try {
      res = await sidecarFetch(settings, sidecarUrl, SIDECAR_PATHS.decide, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: stringifyJson(call),
      });
    } catch {
      throw new ServiceError("unavailable", "the model service is unreachable; retry shortly", `sidecar of release ${release.id} unreachable`);
    }
    const text = await res.text().catch(() => "");
    // The whole sidecar call as the edge saw it, then the sidecar's own hops inside it.
    timings.add("sidecar", performance.now() - sidecarStarted);
    timings.merge(Timings.parse(res.headers.get(SERVER_TIMING_HEADER)));
    if (!res.ok) {
      // The sidecar speaks the same envelope; its status (422, 503, 504, 529) is the client's answer.
      const envelope = ErrorEnvelope.safeParse(parseOrUndefined(text));
      if (envelope.success) {
        if (res.status === 503 || res.status === 529) c.header("retry-after", "1");
        return c.json(envelope.data, res.status as 503);
      }
      // A proxy in front of a sidecar that is restarting or down answers these itself: retry shortly.
      if (res.status === 502 || res.status === 503 || res.status === 504) {
        throw new ServiceError("unavailable", "the model service is unreachable; retry shortly", `sidecar of release ${release.id} answered HTTP ${res.status} without the envelope (a proxy in front of it?)`);
      }
      throw new ServiceError("bad_gateway", "the model service answered malformed output");
    }
    const result = SidecarDecideResponse.safeParse(parseOrUndefined(text));
    if (!result.success) throw new ServiceError("bad_gateway", "the model service answered malformed output");
    const body: DecisionResponse = { model: release.id, answers: result.data.answers, usage: result.data.usage };
    // Written in order: answers as the questions came, probabilities as the options came.
    return orderedJson(c, body);
  },
);
