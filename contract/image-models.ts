/**
 * Image models as a signed-in user sees them (GET /v1/image-models, a session route): every image
 * training of the account that produced a result, with its state and its saved task.
 *
 *   training_passed  the candidate met the acceptance rule and is registered, not served yet
 *   api_ready        the serving runtime reported the model's exact identity: decisions may use it
 *   rejected         it did not meet the rule; kept with its report, never served, and it has no id
 *
 * The task is what every decision with the model must repeat: its one question, with its answers
 * in `outcome_order` as the key order of `criteria`.
 */
import { z } from "zod";
import { JsonValue } from "./fields.ts";

export const IMAGE_MODEL_STATES = ["training_passed", "api_ready", "rejected"] as const;
export const ImageModelState = z.enum(IMAGE_MODEL_STATES);
export type ImageModelState = z.infer<typeof ImageModelState>;

const Unit = z.number().min(0).max(1);

export const ImageModel = z.object({
  object: z.literal("image_model"),
  /** What decisions name as `model`; null for a rejected result. */
  id: z.string().nullable(),
  /** The training that made it (GET /v1/trainings/{id}, and its report). */
  training: z.string().uuid(),
  state: ImageModelState,
  task: z.object({
    /** The question's id in `questions`. */
    question_id: z.string(),
    /** The question exactly as a decision sends it. */
    question: JsonValue,
    /** The answers' names in outcome order: the key order of `question.criteria`. */
    outcome_order: z.array(z.string()),
  }),
  /** Held-out figures from the report: top-1 accuracy (answers and "other"), chance's, ECE, and unknown-detection AUROC. */
  evaluation: z.object({ accuracy: Unit, chance: Unit, ece: Unit, unknown_auroc: Unit.nullable() }).nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export type ImageModel = z.infer<typeof ImageModel>;

export const ImageModelList = z.object({ object: z.literal("list"), data: z.array(ImageModel) });
export type ImageModelList = z.infer<typeof ImageModelList>;
