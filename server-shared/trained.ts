/**
 * A trained release as the server tiers store and check it (sidecar and operator tools; the edge
 * reads only its task): the saved task every request must repeat, the trained head per question,
 * the fingerprint that covers both and the base.
 *
 * A trained release runs on its base release's runtime. Its head reads what the question's first
 * served pass gives (the hidden state at the answer position, the state's pooled hidden state, the
 * label log-probabilities: FEATURE_BLOCKS, runtime-protocol.ts `hidden_state` and `pooled_state`),
 * and may read the state's sentence embedding (`/v1/embed`, by the encoder its params name),
 * so the same rendering must be used to train it and to serve it: RENDERING_VERSION is part of its
 * fingerprint, as it is of its base's.
 */
import { z } from "zod";
import { Questions } from "../contract/decision.ts";
import { parseJson } from "../contract/json.ts";
import { LIMITS } from "../contract/limits.ts";
import { FeatureBlock } from "../contract/trainings.ts";
export { FEATURE_BLOCKS, FeatureBlock } from "../contract/trainings.ts";
import { IMAGE_PREPROCESSING_VERSION, RENDERING_VERSION } from "./runtime-protocol.ts";

const Finite = z.number().finite();

/** One question's head (sidecar/train/head.ts): standardisation, linear weights (bias last), calibration. */
export const HeadParams = z.object({
  classes: z.number().int().min(2),
  lambda: z.number().positive(),
  mean: z.array(Finite).min(1),
  scale: z.array(z.number().positive()),
  /** One row (the logit of the first outcome) for two classes, one per class otherwise; each mean.length + 1 long. */
  weights: z.array(z.array(Finite)).min(1),
  calibration: z.union([z.object({ slope: Finite, bias: Finite }), z.object({ temperature: z.number().positive() })]),
  /**
   * The blocks a text head reads, in FEATURE_BLOCKS order; its passes then ask for the pooled state
   * (which evaluates the prefix in pieces). Absent on an image head, and on a text head trained before
   * the blocks, which reads `answer_state` of a pass whose prefix was evaluated whole.
   */
  inputs: z.array(FeatureBlock).min(1).optional(),
  /**
   * The fingerprint of the sentence encoder whose embeddings the head reads (runtime-protocol.ts
   * Identity `encoder`), present exactly when `inputs` names `sentence_embedding`: the head is served
   * only by a runtime with that encoder.
   */
  encoder: z.string().regex(/^[0-9a-f]{64}$/).optional(),
}).refine((h) => (h.inputs?.includes("sentence_embedding") ?? false) === (h.encoder !== undefined), {
  message: "a head names its encoder exactly when it reads sentence_embedding",
});
export type HeadParams = z.infer<typeof HeadParams>;

/**
 * What a trained release adds to its base: a head per question of the task, in the task's order, on
 * the base's hidden state ("hidden_state_head"), or on an image backbone's pooled features
 * ("image_head": one question, its answers and then "other").
 */
export const TrainedHeads = z.object({
  kind: z.enum(["hidden_state_head", "image_head"]),
  /** Width of the base's hidden state, or of the backbone's features. */
  features: z.number().int().positive(),
  questions: z.array(HeadParams).min(1),
});
export type TrainedHeads = z.infer<typeof TrainedHeads>;

/**
 * The saved task: the JSON text of the training file's `questions`, exactly as the first line asked
 * them (contract/json.ts stringifyJson of the parsed questions), kept as text because its key order
 * (the questions', a choice's options') is meaning and jsonb would not keep it.
 */
export const SavedTask = z.object({ questions: z.string().min(2) });
export type SavedTask = z.infer<typeof SavedTask>;

/** JSON with every object's keys sorted: the head's text as its fingerprint reads it, whatever order a store gives back. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The fingerprint of a trained release: its base's fingerprint, how its input is made (the text
 * rendering for a head on hidden states; an image head's base fingerprint already covers the image
 * preprocessing), the task and the heads, hashed together.
 */
export function trainedFingerprint(baseFingerprint: string, task: SavedTask, heads: TrainedHeads): Promise<string> {
  const input = heads.kind === "image_head" ? IMAGE_PREPROCESSING_VERSION : RENDERING_VERSION;
  const text = `trained-release-v1\n${baseFingerprint}\n${input}\n${task.questions}\n${canonicalJson(TrainedHeads.parse(heads))}`;
  return sha256Hex(text);
}

/** The id of the release a training registers: `ft:<base model>:<training id without dashes>`, within the registry's id pattern. */
export function trainedModelId(baseModel: string, trainingId: string): string {
  const base = baseModel.replace(/[^A-Za-z0-9._@-]/g, "-").slice(0, 60) || "base";
  return `ft:${base}:${trainingId.replace(/-/g, "")}`;
}

/** The task's questions, parsed from the saved text (key order kept). */
export function savedQuestions(task: SavedTask): z.infer<typeof Questions> {
  return Questions.parse(parseJson(task.questions, { maxDepth: LIMITS.jsonDepth }));
}
