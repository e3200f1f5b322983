/**
 * POST /v1/systemone with an API key (runs in workerd): validate once with the contract, budget the
 * worst-case input tokens, admit them against the account's quotas, resolve the model, and forward
 * to the sidecar. Neither the request nor the response body is logged or persisted here.
 */
import { Hono } from "hono";
import { DecisionRequest, type DecisionResponse } from "../../contract/decision.ts";
import { ErrorEnvelope, ServiceError } from "../../contract/errors.ts";
import { LIMITS } from "../../contract/limits.ts";
import { budgetOf } from "../../contract/render.ts";
import { SIDECAR_PATHS, SidecarDecideResponse, type SidecarDecideRequest } from "../../contract/sidecar-protocol.ts";
import { apiKeyAuth } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import { readJson } from "../body.ts";
import type { AppEnv } from "../env.ts";
import { resolveModel } from "../models.ts";
import { sidecarFetch } from "../services.ts";

export const decisions = new Hono<AppEnv>();

decisions.post(
  "/v1/systemone",
  apiKeyAuth,
  async (c, next) => {
    const request = await readJson(c, DecisionRequest, LIMITS.decisionBodyBytes);
    if (request.images !== undefined) {
      throw new ServiceError("invalid_request", "images: image decisions are not enabled on this service");
    }
    const budget = budgetOf(request);
    if (budget.finalPassTooLong) {
      const { questionId, bound } = budget.finalPassTooLong;
      throw new ServiceError(
        "invalid_request",
        `questions.${questionId}.criteria: the final pass over this choice's leading options may need ${bound} tokens; at most ${LIMITS.tokensPerPass} per pass (shorten the option descriptions)`,
      );
    }
    if (budget.reservedTokens > LIMITS.reservedInputTokensPerRequest) {
      throw new ServiceError(
        "invalid_request",
        `questions: this request may need ${budget.reservedTokens} input tokens; at most ${LIMITS.reservedInputTokensPerRequest} per request (fewer questions or a shorter state)`,
      );
    }
    c.set("decision", request);
    c.set("reservedTokens", budget.reservedTokens);
    await next();
  },
  quota(),
  async (c) => {
    const request = c.get("decision");
    const account = c.get("account");
    const release = await resolveModel(c.env, request.model, account.id);
    if (!release) throw new ServiceError("model_not_found", "no model of that name is available to this account");

    const call: SidecarDecideRequest = {
      release,
      request: { state: request.state, questions: request.questions },
      account_id: account.id,
      key_id: c.get("keyId"),
      request_id: c.get("requestId"),
    };
    let res: Response;
    try {
      res = await sidecarFetch(c.env, SIDECAR_PATHS.decide, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(call),
      });
    } catch {
      throw new ServiceError("unavailable", "the model service is unreachable; retry shortly");
    }
    const json: unknown = await res.json().catch(() => undefined);
    if (!res.ok) {
      // The sidecar speaks the same envelope; its status (422, 503, 504, 529) is the client's answer.
      const envelope = ErrorEnvelope.safeParse(json);
      if (envelope.success) {
        if (res.status === 503 || res.status === 529) c.header("retry-after", "1");
        return c.json(envelope.data, res.status as 503);
      }
      throw new ServiceError("bad_gateway", "the model service answered malformed output");
    }
    const result = SidecarDecideResponse.parse(json);
    const body: DecisionResponse = { model: release.id, answers: result.answers, usage: result.usage };
    return c.json(body);
  },
);
