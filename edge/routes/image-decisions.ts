/**
 * Image decisions and what a signed-in user sees of image models (runs in workerd), behind the image
 * flags (edge/auth/image.ts):
 *
 *   POST /v1/systemone {model, state, questions, images: [{asset_id}]}   with the owner's API key (IMAGE_API)
 *   POST /v1/image-decisions (the same body)                              a signed-in session (IMAGE_BROWSER)
 *   GET  /v1/image-models                                                 a signed-in session: the account's image models
 *   GET  /v1/image-credit                                                       the account's prepaid credit (either credential)
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
import { Hono, type Context } from "hono";
import { creditFor, IMAGE_PRICING, textTokensOf, type CreditBalance } from "../../contract/credit.ts";
import { z } from "zod";
import { DecisionRequest, type ChoiceQuestion, type DecisionResponse } from "../../contract/decision.ts";
import { EvaluationReport } from "../../contract/trainings.ts";
import { SavedTask, savedQuestions } from "../../server-shared/trained.ts";
import { imageRequestViolation } from "../../contract/images.ts";
import { parseJson, stringifyJson, type Json } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import type { ImageModel, ImageModelList } from "../../contract/image-models.ts";
import { readJson } from "../../server-shared/body.ts";
import { CreditStore } from "../../server-shared/credit.ts";
import { Column, httpDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { signGrant } from "../../server-shared/grants.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { ImageAssetStore, readGrantMs } from "../../server-shared/images.ts";
import { SIDECAR_PATHS, type SidecarImageDecideCall } from "../../server-shared/sidecar-protocol.ts";
import { imageAuth, imageSession } from "../auth/image.ts";
import type { AppEnv } from "../env.ts";
import { resolveModel, type Resolution } from "../models.ts";
import { services } from "../services.ts";
import { decideOnSidecar } from "../sidecar-call.ts";
import { storageGrants } from "../storage.ts";

export const imageDecisions = new Hono<AppEnv>();

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
    const url = await signGrant(storageGrants(c), asset.object, "GET", grantMs, {}, now);
    const call: SidecarImageDecideCall = {
      release,
      request: { state: request.state, questions: request.questions },
      image: { grant: { url, headers: {} }, bytes: asset.bytes, sha256: asset.sha256 },
      account_id: accountId,
      key_id: keyId,
      request_id: c.get("requestId"),
    };
    const answered = await decideOnSidecar(c, sidecarUrl, SIDECAR_PATHS.imageDecide, stringifyJson(call), release.id);
    if (!answered.ok) return answered.response;
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

imageDecisions.use("/v1/image-decisions", imageSession);
imageDecisions.post("/v1/image-decisions", async (c) => {
  const request = await readJson(c, DecisionRequest);
  if (request.images === undefined) throw new ServiceError("invalid_request", "images: an image decision names its image: images: [{asset_id}]");
  const violation = imageViolation(request);
  if (violation) throw violation;
  const accountId = c.get("imageAccount");
  const resolved = await resolveModel(services(c.env).sql, request.model, accountId);
  return imageDecision(c, { accountId, keyId: null, request, resolved });
});

imageDecisions.use("/v1/image-models", imageSession);
imageDecisions.get("/v1/image-models", async (c) => {
  const rows = await services(c.env).sql.query(
    `SELECT t.id AS training, t.status, t.model_id, t.task, t.created_at, t.finished_at, t.report
       FROM trainings t JOIN model_releases b ON b.id = t.base_release
      WHERE t.account_id = $1 AND b.modality = 'image' AND t.status IN ('accepted', 'ready', 'rejected')
      ORDER BY t.created_at DESC, t.id DESC LIMIT $2`,
    [c.get("imageAccount"), LIMITS.imageModelsListed],
  );
  const list: ImageModelList = { object: "list", data: rows.map(imageModelOf) };
  return orderedJson(c, list);
});

imageDecisions.use("/v1/image-credit", imageAuth);
imageDecisions.get("/v1/image-credit", async (c) => {
  const { balanceMicroUsd, reservedMicroUsd } = await new CreditStore(httpDb(services(c.env).sql)).balance(c.get("imageAccount"));
  const body: CreditBalance = { object: "credit_balance", balance_micro_usd: balanceMicroUsd, reserved_micro_usd: reservedMicroUsd, pricing: { ...IMAGE_PRICING } };
  return c.json(body);
});

const STATES: Record<string, ImageModel["state"]> = { accepted: "training_passed", ready: "api_ready", rejected: "rejected" };

/** A training of an image model as the listing shows it. */
function imageModelOf(raw: Record<string, unknown>): ImageModel {
  const row = ImageModelRow.parse(raw);
  const [[questionId, question]] = [...savedQuestions(row.task)] as [[string, ChoiceQuestion]];
  const figures = row.report?.questions[0];
  return {
    object: "image_model",
    id: row.status === "rejected" ? null : row.model_id,
    training: row.training,
    state: STATES[row.status]!,
    // The question as saved, its key order kept: what a decision sends.
    task: { question_id: questionId, question: (parseJson(row.task.questions) as Map<string, Json>).get(questionId)!, outcome_order: [...question.criteria.keys()] },
    evaluation: figures
      ? { accuracy: figures.candidate.accuracy, chance: figures.zero_shot.primary, ece: figures.candidate.ece, unknown_auroc: row.report?.unknown?.auroc ?? null }
      : null,
    created_at: row.created_at,
    finished_at: row.finished_at,
  };
}

const ImageModelRow = z.object({
  training: z.string(),
  status: z.enum(["accepted", "ready", "rejected"]),
  model_id: z.string().nullable(),
  task: SavedTask,
  report: EvaluationReport.nullable(),
  created_at: Column.time,
  finished_at: Column.time.nullable(),
});
