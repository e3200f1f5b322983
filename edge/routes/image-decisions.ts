/**
 * POST /v1/image-decisions (runs in workerd): an image decision with a signed-in session, where
 * IMAGE_BROWSER is on (edge/auth/image.ts); the same body as POST /v1/systemone with `images`, which
 * takes the owner's API key. The account's per-second quotas apply, as on that route. What an image
 * decision does: edge/image-decision.ts.
 */
import { Hono } from "hono";
import { DecisionRequest } from "../../contract/decision.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { imageSession } from "../auth/image.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { imageDecision, imageViolation, imageWorstTokens } from "../image-decision.ts";
import { resolveModel } from "../models.ts";
import { services } from "../services.ts";

export const imageDecisions = new Hono<AppEnv>();

imageDecisions.use("/v1/image-decisions", imageSession);
imageDecisions.post(
  "/v1/image-decisions",
  async (c, next) => {
    const request = await readJson(c, DecisionRequest);
    if (request.images === undefined) throw new ServiceError("invalid_request", "images: an image decision names its image: images: [{asset_id}]");
    const violation = imageViolation(request);
    if (violation) throw violation;
    // The account's per-second quotas apply here as on every decision route (the session set the
    // account with its settings: auth/image.ts), the worst case reserved.
    c.set("decision", request);
    c.set("reservedTokens", imageWorstTokens(request));
    await next();
  },
  quota(),
  async (c) => {
    const request = c.get("decision");
    const accountId = c.get("accountId");
    const resolved = await resolveModel(services(c.env).sql, request.model, accountId);
    return imageDecision(c, { accountId, keyId: null, request, resolved });
  },
);
