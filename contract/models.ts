/** `GET /v1/models`: the names and aliases an account may use. */
import { z } from "zod";

export const ModelItem = z.object({
  name: z.string(),
  aliases: z.array(z.string()),
  description: z.string(),
  release_date: z.string(),
  /** Path of the release's calibration report (GET it with the same key); null for an uncalibrated release. */
  calibration: z.string().nullable().optional(),
  /** Path of a trained model's evaluation report (GET it with the same key); null for any other model. */
  evaluation: z.string().nullable().optional(),
});
export type ModelItem = z.infer<typeof ModelItem>;

export const ModelList = z.object({ models: z.array(ModelItem) });
export type ModelList = z.infer<typeof ModelList>;

/** POST /v1/models/{model}/retire: the owner's trained model, retired. */
export const RetiredModel = z.object({ id: z.string(), object: z.literal("model"), retired: z.literal(true) });
export type RetiredModel = z.infer<typeof RetiredModel>;
