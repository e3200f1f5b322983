/**
 * One image decision (runs in workerd), for both routes that take one: POST /v1/systemone with
 * `images` and the owner's API key (IMAGE_API; routes/decisions.ts), and POST /v1/image-decisions
 * with a signed-in session (IMAGE_BROWSER; routes/image-decisions.ts).
 *
 * An image decision: one still photo (a ready asset of the account) and one `choice` question,
 * which must be the model's saved question in its outcome order (the sidecar checks it, 422
 * `task_mismatch`). Before any GPU work the account's credit is reserved for the worst case (every
 * visual token a runtime may process, and the state and question once: 402 `insufficient_credit`
 * when it cannot be); the sidecar answers through the image runtime, which reads the canonical PNG
 * through a grant of at most LIMITS.imageReadGrantMs; the reservation is then settled once at what
 * was used, before the answer is returned, or released when no answer comes. The sidecar dying after
 * it answered changes nothing here; the edge dying in between leaves the reservation to the sidecar's
 * sweep (LIMITS.imageCreditHoldMs), which gives it back: an answer never returned is never charged.
 */
import type { Context } from "hono";
import { creditFor, IMAGE_PRICING, textTokensOf } from "../contract/credit.ts";
import type { DecisionRequest, DecisionResponse } from "../contract/decision.ts";
import { imageRequestViolation } from "../contract/images.ts";
import { stringifyJson } from "../contract/json.ts";
import { LIMITS } from "../contract/limits.ts";
import { CreditStore } from "../server-shared/credit.ts";
import { httpDb } from "../server-shared/db.ts";
import { ServiceError } from "../server-shared/errors.ts";
import { signGrant } from "../server-shared/grants.ts";
import { orderedJson } from "../server-shared/http.ts";
import { ImageAssetStore, readGrantMs } from "../server-shared/images.ts";
import { SIDECAR_PATHS, type SidecarImageDecideCall } from "../server-shared/sidecar-protocol.ts";
import type { AppEnv } from "./env.ts";
import type { Resolution } from "./models.ts";
import { services } from "./services.ts";
import { decideOnSidecar } from "./sidecar-call.ts";
import { storageGrants } from "./storage.ts";

/** The most billable tokens an image decision may use: every visual token a runtime may process, and the state and question once. */
export function imageWorstTokens(request: Pick<DecisionRequest, "state" | "questions">): number {
  return LIMITS.imageVisualTokens + textTokensOf(stringifyJson({ state: request.state, questions: request.questions }));
}

/** The 422 of an image decision's body beyond its schema, as a ServiceError; null when it is good. */
export function imageViolation(request: DecisionRequest): ServiceError | null {
  const violation = imageRequestViolation(request);
  return violation ? new ServiceError("invalid_request", violation) : null;
}

/**
 * One image decision for `accountId` (a key's or a signed-in user's), against the model `resolved`
 * names; the request has passed imageViolation.
 */
export async function imageDecision(
  c: Context<AppEnv>,
  args: { accountId: string; keyId: string | null; request: DecisionRequest; resolved: Resolution | null },
): Promise<Response> {
  const { accountId, keyId, request, resolved } = args;
  if (!resolved) throw new ServiceError("model_not_found", "no model of that name is available to this account");
  const { release, sidecarUrl } = resolved;
  // Not an image model of this account: the spec's 404 ("image or model unavailable to the account"), saying why.
  if (resolved.modality !== "image") throw new ServiceError("model_not_found", `no image model of that name is available to this account: ${JSON.stringify(release.id)} reads text (GET /v1/image-models lists yours)`);
  if (!resolved.trained) {
    throw new ServiceError("model_not_found", `no image model of that name is available to this account: ${JSON.stringify(release.id)} is the image backbone image models are trained on (POST /v1/trainings)`);
  }
  if (!sidecarUrl) throw new ServiceError("unavailable", "this model is not being served right now; retry later", `release ${release.id} has no sidecar_url in the registry`);
  const { sql } = services(c.env);
  const assetId = request.images![0]!.asset_id;
  const asset = await c.var.timings.time("asset", () => new ImageAssetStore(httpDb(sql)).canonical(assetId, accountId));
  if (!asset) throw new ServiceError("not_found", "images.0.asset_id: no ready image asset of this account has that id (an asset expires 24 hours after it was created)");

  const credit = new CreditStore(httpDb(sql));
  const worst = creditFor(imageWorstTokens(request));
  const reservation = await credit.reserve(accountId, worst, { requestId: c.get("requestId"), ttlMs: LIMITS.imageCreditHoldMs });
  if (!reservation.ok) {
    throw new ServiceError(
      "insufficient_credit",
      `this image decision may cost up to ${worst} micro-USD (${IMAGE_PRICING.micro_usd_per_billable_token} per billable token); the account's prepaid credit is ${reservation.balanceMicroUsd} micro-USD: add credit and retry`,
    );
  }
  let settled = false;
  try {
    const now = Date.now();
    const holdUntil = now + LIMITS.imageCreditHoldMs;
    const grantMs = readGrantMs(now, asset.expiresAt ?? holdUntil, holdUntil);
    if (grantMs <= 0) throw new ServiceError("not_found", "images.0.asset_id: no ready image asset of this account has that id (it has just expired)");
    const url = await signGrant(storageGrants(c, "hosts"), asset.object, "GET", grantMs, {}, now);
    const call: SidecarImageDecideCall = {
      release,
      request: { state: request.state, questions: request.questions },
      image: { grant: { url, headers: {} }, bytes: asset.bytes, sha256: asset.sha256 },
      account_id: accountId,
      key_id: keyId,
      request_id: c.get("requestId"),
    };
    const answered = await decideOnSidecar(c, sidecarUrl, SIDECAR_PATHS.imageDecide, stringifyJson(call), release.id);
    if (!answered.ok) {
      // Only a decision sent with `confirm` (a kept key) can be stale; an image decision never is.
      if (answered.stale) throw new ServiceError("bad_gateway", "the model service answered malformed output");
      return answered.response;
    }
    const { answers, usage } = answered.data;
    const charged = creditFor(usage.billable_input_tokens ?? imageWorstTokens(request));
    if (!(await credit.settle(reservation.id, charged))) {
      // Only a reservation the sweep already gave back: the answer goes out uncharged.
      console.error(`image decision ${c.get("requestId")}: reservation ${reservation.id} was no longer held at settlement; not charged`);
    }
    settled = true;
    const body: DecisionResponse = { model: release.id, answers, usage };
    return orderedJson(c, body);
  } finally {
    if (!settled) await credit.release(reservation.id).catch(() => console.error(`image decision ${c.get("requestId")}: reservation ${reservation.id} left for the sweep`));
  }
}
