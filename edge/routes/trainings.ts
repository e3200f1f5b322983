/**
 * Training jobs with the signed-in user's access token (runs in workerd), as key management takes
 * it; the wire shapes are contract/trainings.ts, every statement the training store's
 * (server-shared/jobs/trainings.ts).
 *
 *   POST /v1/trainings {idempotency_key, model?}  -> 201 Training + upload (200 with the same training on a repeat)
 *   POST /v1/trainings/{id}/submit {}             -> Training (queued); 409 until the file has been uploaded
 *   GET  /v1/trainings/{id}                       -> Training
 *   POST /v1/trainings/{id}/cancel {}             -> Training
 *   GET  /v1/trainings?limit=&after=              -> TrainingList, newest first
 *   GET  /v1/trainings/{id}/report(.svg)          -> EvaluationReport, or its reliability diagram
 *   POST /v1/models/{model}/retire {}             -> {id, object: "model", retired: true}
 *
 * A training belongs to the user's account; another account's training or model answers the same
 * 404 as an unknown id. An API key is refused on every one of these routes (userAuth).
 */
import { Hono, type Context } from "hono";
import { tooManyRequests } from "../../server-shared/http.ts";
import { LIMITS } from "../../contract/limits.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import { CreateTrainingRequest, EvaluationReport, isTrainingTerminal, TRAINING_LIMITS, type Training, type TrainingList } from "../../contract/trainings.ts";
import { readJson } from "../../server-shared/body.ts";
import { httpDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { signUpload } from "../../server-shared/grants.ts";
import { TRAINING_PROGRESS_WINDOW_MINUTES, TrainingStore, type TrainingStatusRow } from "../../server-shared/jobs/trainings.ts";
import { reliabilitySvg } from "../../server-shared/quality.ts";
import { userAccount } from "../accounts.ts";
import { userAuth } from "../auth/user.ts";
import type { AppEnv } from "../env.ts";
import { resolveModel } from "../models.ts";
import { pathParam, queryParam } from "../params.ts";
import { services } from "../services.ts";
import { storageGrants } from "../storage.ts";

export const trainings = new Hono<AppEnv>();
trainings.use("/v1/trainings", userAuth);
trainings.use("/v1/trainings/*", userAuth);
trainings.use("/v1/models/:model/retire", userAuth);

const storeOf = (c: Context<AppEnv>) => new TrainingStore(httpDb(services(c.env).sql));

/** Where a training's report is published. */
export const reportPath = (id: string) => `/v1/trainings/${id}/report`;


trainings.post("/v1/trainings", async (c) => {
  const request = await readJson(c, CreateTrainingRequest, { maxBytes: LIMITS.controlBodyBytes });
  const accountId = await userAccount(c, { create: true });
  const outcome = await storeOf(c).create({ id: crypto.randomUUID(), accountId, idempotencyKey: request.idempotency_key, baseModel: request.model });
  if (!outcome.training) {
    return tooManyRequests(c, "active_training_limit", `this account may have at most ${LIMITS.activeTrainings} unfinished trainings; wait for one to finish or cancel one`, LIMITS.jobLimitRetryMs);
  }
  const { training, created } = outcome;
  const needsUpload = training.status === "uploading" && (created || (await c.env.BUCKET.head(training.object_key)) === null);
  const body: Training = { ...trainingOf(training), ...(needsUpload ? { upload: await signUpload(storageGrants(c), training.object_key) } : {}) };
  return c.json(body, created ? 201 : 200);
});

trainings.get("/v1/trainings", async (c) => {
  const limit = queryParam(c, PARAMETERS.trainingListLimit);
  const after = queryParam(c, PARAMETERS.trainingListAfter);
  const accountId = await userAccount(c, { create: false });
  const { rows, hasMore } = accountId ? await storeOf(c).list(accountId, { after, limit }) : { rows: [], hasMore: false };
  const page = rows.map(trainingOf);
  const body: TrainingList = { object: "list", data: page, has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
  return c.json(body);
});

trainings.get("/v1/trainings/:id", async (c) => c.json(trainingOf((await findTraining(c)).row)));

trainings.post("/v1/trainings/:id/submit", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const { row: training, accountId } = await findTraining(c);
  if (training.status !== "uploading") {
    if (training.submitted_at !== null) return c.json(trainingOf(training));
    throw new ServiceError("training_not_submittable", `this training is ${training.status} and was never submitted; create a new one`);
  }
  if (Date.parse(training.expires_at) <= Date.now()) {
    throw new ServiceError("training_not_submittable", "this training passed its deadline before it was submitted; create a new one");
  }
  const input = await c.env.BUCKET.head(training.object_key);
  if (!input) throw new ServiceError("upload_incomplete", "the training file has not been uploaded yet: PUT it to the training's upload URL first");
  // The base as the account may use it now; a trained model is not a base.
  const { sql } = services(c.env);
  const base = await resolveModel(sql, training.base_model, accountId);
  if (!base) throw new ServiceError("model_not_found", "no model of that name is available to this account");
  const [kind] = await sql.query("SELECT task IS NOT NULL AS trained FROM model_releases WHERE id = $1", [base.release.id]);
  if (kind?.trained) throw new ServiceError("invalid_request", "a trained model cannot be the base of another training; name the shared model or another base");
  const submitted = await storeOf(c).submit(training.id, accountId, input.size, base.release.id);
  return c.json(trainingOf(submitted ?? (await findTraining(c)).row));
});

trainings.post("/v1/trainings/:id/cancel", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const { row, accountId } = await findTraining(c);
  const cancelled = await storeOf(c).cancel(row.id, accountId);
  return c.json(trainingOf(cancelled ?? (await findTraining(c)).row));
});

trainings.get("/v1/trainings/:id/report", async (c) => c.json(await reportOf(c)));

trainings.get("/v1/trainings/:id/report.svg", async (c) => {
  const report = await reportOf(c);
  return c.body(reportSvg(report), 200, { "content-type": "image/svg+xml; charset=utf-8", "x-content-type-options": "nosniff" });
});

trainings.post("/v1/models/:model/retire", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const model = pathParam(c, PARAMETERS.modelName);
  const accountId = await userAccount(c, { create: false });
  const retired = model !== null && accountId !== null && (await storeOf(c).retire(model, accountId));
  if (!retired) throw new ServiceError("model_not_found", "no trained model of that name is served to this account");
  return c.json({ id: model, object: "model", retired: true });
});

/** A training's reliability diagram: the candidate and the zero-shot answers, per question. */
export function reportSvg(report: EvaluationReport): string {
  const series = report.questions.flatMap((q) => [
    { name: `${q.question}, trained`, bins: q.reliability_candidate },
    { name: `${q.question}, zero-shot`, bins: q.reliability_zero_shot },
  ]);
  return reliabilitySvg(`Reliability of ${report.model ?? "the rejected candidate"} (cross-validated)`, series);
}

async function reportOf(c: Context<AppEnv>): Promise<EvaluationReport> {
  const { row } = await findTraining(c);
  if (!row.report) throw new ServiceError("report_not_ready", `the report is written once the candidate is evaluated; this training is ${row.status}`);
  return row.report;
}

/** The user's training named by the path, or the same 404 for an unknown id and another account's. */
async function findTraining(c: Context<AppEnv>): Promise<{ row: TrainingStatusRow; accountId: string }> {
  const id = pathParam(c, PARAMETERS.trainingId);
  const accountId = await userAccount(c, { create: false });
  const row = id === null || accountId === null ? null : await storeOf(c).find(id, accountId);
  if (!row) throw new ServiceError("not_found", "no training with this id in this account");
  return { row, accountId: accountId! };
}

function trainingOf(row: TrainingStatusRow): Training {
  const report = row.report;
  return {
    id: row.id,
    object: "training",
    status: row.status,
    idempotency_key: row.idempotency_key,
    base_model: row.base_model,
    base_release: row.base_release,
    model: row.model_id,
    created_at: row.created_at,
    input_bytes: row.input_bytes,
    submitted_at: row.submitted_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
    expires_at: row.expires_at,
    data_expires_at: row.finished_at && new Date(Date.parse(row.finished_at) + LIMITS.trainingDataRetentionMs).toISOString(),
    examples: { total: row.total_examples, held_out: row.held_out_examples },
    error: row.error,
    progress: isTrainingTerminal(row.status) || row.status === "uploading" ? null : progressOf(row),
    evaluation: report && {
      decision: report.decision,
      report: reportPath(row.id),
      questions: report.questions.map((q) => ({
        question: q.question,
        metric: q.candidate.primary_metric,
        candidate: q.candidate.primary,
        zero_shot: q.zero_shot.primary,
        ece: q.candidate.ece,
        passed: q.passed,
      })),
    },
    limits: TRAINING_LIMITS,
  };
}

/** What the job does now, its reading rate over the last minutes, and when the reading may be done. */
function progressOf(row: TrainingStatusRow): NonNullable<Training["progress"]> {
  const now = Date.now();
  const since = Math.max(now - TRAINING_PROGRESS_WINDOW_MINUTES * 60_000, Date.parse(row.started_at ?? row.created_at));
  const perMinute = row.recent_reads / Math.max((now - since) / 60_000, 1 / 60);
  const remaining = row.total_examples - row.examples_read;
  const step =
    row.status === "queued"
      ? "waiting for a GPU host"
      : row.status === "validating"
        ? "checking the training file"
        : row.status === "accepted"
          ? "accepted; waiting for the serving side to report the new model's identity"
          : remaining > 0
            ? `reading examples through the base model (${row.examples_read} of ${row.total_examples})`
            : "fitting and evaluating the candidate";
  return {
    step,
    examples_total: row.total_examples,
    examples_read: row.examples_read,
    examples_per_minute: Math.round(perMinute * 10) / 10,
    estimated_completion_at: row.status === "running" && remaining > 0 && perMinute > 0 ? new Date(now + (remaining / perMinute) * 60_000).toISOString() : null,
    held_out: row.status === "running" ? row.interim : null,
  };
}
