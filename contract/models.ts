/** `GET /v1/models`: the names and aliases an account may use. */
import { z } from "zod";

export const ModelItem = z.object({
  name: z.string(),
  aliases: z.array(z.string()),
  description: z.string(),
  release_date: z.string(),
  /** Path of the release's calibration report (GET it with the same key); null for an uncalibrated release. */
  calibration: z.string().nullable().optional(),
});
export type ModelItem = z.infer<typeof ModelItem>;

export const ModelList = z.object({ models: z.array(ModelItem) });
export type ModelList = z.infer<typeof ModelList>;
