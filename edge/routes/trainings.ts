/**
 * Training jobs with the signed-in user's access token (runs in workerd), as key management takes
 * it; the wire shapes are contract/trainings.ts. A training is a kind of job: create, submit, get,
 * cancel and list are the job routes (edge/jobs.ts), with a training's hooks; this file adds its
 * report and retiring its model.
 *
 *   POST /v1/trainings {idempotency_key, model?}  -> 201 Training + upload (200 with the same training on a repeat)
 *   POST /v1/trainings/{id}/submit {}             -> Training (queued); 409 until the file has been uploaded
 *   GET  /v1/trainings/{id}                       -> Training
 *   POST /v1/trainings/{id}/cancel {}             -> Training
 *   GET  /v1/trainings?limit=&after=              -> TrainingList, newest first
 *   GET  /v1/trainings/{id}/report(.svg)          -> EvaluationReport (its label audit's first page), or its reliability diagram
 *   GET  /v1/trainings/{id}/label_issues?limit=&after= -> LabelIssueList, the label audit's issues in its order
 *   POST /v1/models/{model}/retire {}             -> {id, object: "model", retired: true}
 *
 * A training belongs to the user's account; another account's training or model answers the same
 * 404 as an unknown id. An API key is refused on every one of these routes (userAuth).
 */
import { Hono, type Context } from "hono";
import { LIMITS } from "../../contract/limits.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import {
  baselineName,
  CreateTrainingRequest,
  EvaluationReport,
  isTrainingTerminal,
  labelIssuePage,
  reportOnTheWire,
  TRAINING_LIMITS,
  type Training,
} from "../../contract/trainings.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { TrainingStore, trainingFrozen, type TrainingStatusRow } from "../../server-shared/jobs/trainings.ts";
import { reliabilitySvg, SVG_HEADERS } from "../../server-shared/quality.ts";
import { userAccount } from "../accounts.ts";
import { userAuth } from "../auth/user.ts";
import type { AppEnv } from "../env.ts";
import { jobRate, jobRoutes } from "../jobs.ts";
import { resolveModel } from "../models.ts";
import { pathParam, queryParam } from "../params.ts";
import { services } from "../services.ts";

export const trainings = new Hono<AppEnv>();
trainings.use("/v1/models/:model/retire", userAuth);

const { find: findTraining, storeOf } = jobRoutes(trainings, {
  path: "/v1/trainings",
  noun: "training",
  auth: [userAuth],
  store: (db) => new TrainingStore(db),
  account: (c, opts) => userAccount(c, opts),
  create: { request: CreateTrainingRequest, columns: (_c, request) => ({ base_model: request.model, exclude_suspected_labels: request.exclude_suspected_labels ?? false }) },
  refusal: (c, quota) =>
    Number(quota.active) >= LIMITS.activeTrainings
      ? tooManyRequests(c, "active_training_limit", `this account may have at most ${LIMITS.activeTrainings} unfinished trainings; wait for one to finish or cancel one`, LIMITS.jobLimitRetryMs)
      : tooManyRequests(
          c,
          "stored_training_limit",
          `this account keeps the data of ${quota.kept} trainings, the most it may (${LIMITS.storedTrainings}); a finished training's file and examples are deleted ` +
            `${LIMITS.trainingDataRetentionMs / 86_400_000} days after it ended, a cancelled, failed or expired one's within a minute`,
          LIMITS.jobLimitRetryMs,
        ),
  frozen: async (c, training, accountId) => {
    // The base as the account may use it now; a trained model is not a base.
    const { sql } = services(c.env);
    const base = await resolveModel(sql, training.base_model, accountId);
    if (!base) throw new ServiceError("model_not_found", "no model of that name is available to this account");
    const [kind] = await sql.query("SELECT task IS NOT NULL AS trained FROM model_releases WHERE id = $1", [base.release.id]);
    if (kind?.trained) throw new ServiceError("invalid_request", "a trained model cannot be the base of another training; name the shared model or another base");
    return trainingFrozen(base.release.id);
  },
  wire: trainingOf,
  parameters: { id: PARAMETERS.trainingId, limit: PARAMETERS.trainingListLimit, after: PARAMETERS.trainingListAfter, status: PARAMETERS.trainingListStatus },
  notSubmittable: "training_not_submittable",
});

/** Where a training's report is published. */
export const reportPath = (id: string) => `/v1/trainings/${id}/report`;

trainings.get("/v1/trainings/:id/report", async (c) => c.json(reportOnTheWire(await reportOf(c))));

trainings.get("/v1/trainings/:id/label_issues", async (c) => {
  const limit = queryParam(c, PARAMETERS.labelIssueLimit);
  const after = queryParam(c, PARAMETERS.labelIssueAfter);
  return c.json(labelIssuePage(await reportOf(c), after, limit));
});

trainings.get("/v1/trainings/:id/report.svg", async (c) => {
  const report = await reportOf(c);
  return c.body(reportSvg(report), 200, SVG_HEADERS);
});

trainings.post("/v1/models/:model/retire", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const model = pathParam(c, PARAMETERS.modelName);
  const accountId = await userAccount(c, { create: false });
  const retired = model !== null && accountId !== null && (await storeOf(c).retire(model, accountId));
  if (!retired) throw new ServiceError("model_not_found", "no trained model of that name is served to this account");
  return c.json({ id: model, object: "model", retired: true });
});

/** A training's reliability diagram: the candidate and its baseline (the zero-shot answers, or chance), per question. */
export function reportSvg(report: EvaluationReport): string {
  const series = report.questions.flatMap((q) => [
    { name: `${q.question}, trained`, bins: q.reliability_candidate },
    { name: `${q.question}, ${baselineName(report.baseline)}`, bins: q.reliability_zero_shot },
  ]);
  return reliabilitySvg(`Reliability of ${report.model ?? "the rejected candidate"} (cross-validated)`, series);
}

async function reportOf(c: Context<AppEnv>): Promise<EvaluationReport> {
  const { row } = await findTraining(c);
  if (!row.report) throw new ServiceError("report_not_ready", `the report is written once the candidate is evaluated; this training is ${row.status}`);
  return row.report;
}

function trainingOf(row: TrainingStatusRow): Training {
  const report = row.report;
  return {
    id: row.id,
    object: "training",
    status: row.status,
    idempotency_key: row.idempotency_key,
    metadata: row.metadata,
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
      baseline: report.baseline ?? "zero_shot",
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
  const remaining = row.total_examples - row.examples_read;
  const rate = jobRate(row, row.recent_reads, remaining);
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
    examples_per_minute: rate.perMinute,
    estimated_completion_at: row.status === "running" && remaining > 0 ? rate.doneAt : null,
    held_out: row.status === "running" ? row.interim : null,
  };
}
