/**
 * GET /v1/image-models (runs in workerd): a signed-in session's image models, where IMAGE_BROWSER is
 * on (edge/auth/image.ts): each image training of the account that passed or was rejected, with its
 * saved question and its evaluation, newest first, at most LIMITS.imageModelsListed.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { ChoiceQuestion } from "../../contract/decision.ts";
import type { ImageModel, ImageModelList } from "../../contract/image-models.ts";
import { parseJson, type Json } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { EvaluationReport } from "../../contract/trainings.ts";
import { Column } from "../../server-shared/db.ts";
import { orderedJson } from "../../server-shared/http.ts";
import { SavedTask, savedQuestions } from "../../server-shared/trained.ts";
import { imageSession } from "../auth/image.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const imageModels = new Hono<AppEnv>();

imageModels.use("/v1/image-models", imageSession);
imageModels.get("/v1/image-models", async (c) => {
  const rows = await services(c.env).sql.query(
    `SELECT t.id AS training, t.status, t.model_id, t.task, t.created_at, t.finished_at, t.report
       FROM trainings t JOIN model_releases b ON b.id = t.base_release
      WHERE t.account_id = $1 AND b.modality = 'image' AND t.status IN ('accepted', 'ready', 'rejected')
      ORDER BY t.created_at DESC, t.id DESC LIMIT $2`,
    [c.get("accountId"), LIMITS.imageModelsListed],
  );
  const list: ImageModelList = { object: "list", data: rows.map(imageModelOf) };
  return orderedJson(c, list);
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
