/**
 * The real-time decision request and response (also the body of a bulk record), compatible with the
 * third-party "System One" clients. Every bound comes from LIMITS; the edge validates once with these
 * schemas and nothing malformed reaches the sidecar.
 *
 *     POST /v1/systemone
 *     { "model": "svc-shared", "state": {...} | [...] | "text",
 *       "questions": { "q1": { "type": "noul", "instructions": "Is it urgent?" },
 *                      "q2": { "type": "choice", "criteria": { "billing": null, "bug": "a defect" } },
 *                      "q3": { "type": "score", "criteria": ["none", "some", "severe"] } } }
 */
import { z } from "zod";
import { LIMITS, SHARED_ALIAS } from "./limits.ts";

/** Any JSON value (depth is bounded by the body reader). */
export const JsonValue: z.ZodType<unknown> = z.json();

/** Text, a JSON object or array, or null/absent. */
const Instructions = z
  .union([z.string(), z.custom<object>((v) => typeof v === "object" && v !== null, "instructions must be text, a JSON object or array, or null")])
  .nullable()
  .optional();

const Description = z.union([z.string(), JsonValue]).nullable().optional();

export const NoulQuestion = z.strictObject({
  type: z.literal("noul"),
  instructions: Instructions,
  /** What true and false mean; either may be left out. */
  criteria: z.strictObject({ true: Description, false: Description }).nullable().optional(),
});

export const ChoiceQuestion = z.strictObject({
  type: z.literal("choice"),
  instructions: Instructions,
  /** Option name -> description (may be null). Key order is the outcome order used for ties. */
  criteria: z
    .record(z.string().min(1, "option names must not be empty").max(200, "option names must be at most 200 characters"), Description)
    .refine((options) => Object.keys(options).length >= LIMITS.choiceOptions.min, `a choice needs at least ${LIMITS.choiceOptions.min} options`)
    .refine((options) => Object.keys(options).length <= LIMITS.choiceOptions.max, `a choice has at most ${LIMITS.choiceOptions.max} options`),
});

export const ScoreQuestion = z.strictObject({
  type: z.literal("score"),
  instructions: Instructions,
  /** The legend: level 0 first; each level is text or structured JSON, never null. */
  criteria: z
    .array(JsonValue.refine((level) => level !== null, "a score level must not be null"))
    .min(LIMITS.scoreLevels.min, `a score needs at least ${LIMITS.scoreLevels.min} levels`)
    .max(LIMITS.scoreLevels.max, `a score has at most ${LIMITS.scoreLevels.max} levels`),
});

export const Question = z.discriminatedUnion("type", [NoulQuestion, ChoiceQuestion, ScoreQuestion], {
  error: (issue) => (issue.code === "invalid_union" ? 'type must be "noul", "choice" or "score"' : undefined),
});
export type Question = z.infer<typeof Question>;
export type NoulQuestion = z.infer<typeof NoulQuestion>;
export type ChoiceQuestion = z.infer<typeof ChoiceQuestion>;
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;

export const QUESTION_ID_MAX = 200;

export const DecisionRequest = z.object({
  /** Alias or release id; the shared alias when absent (the tools always send one). */
  model: z.string().min(1, "model must not be empty").max(200).default(SHARED_ALIAS),
  state: z.union([z.string(), z.custom<object>((v) => typeof v === "object" && v !== null)], {
    error: "state must be a JSON object, an array or text",
  }),
  questions: z
    .record(z.string().min(1, "question ids must not be empty").max(QUESTION_ID_MAX), Question)
    .refine((questions) => Object.keys(questions).length > 0, "questions must hold at least one question"),
  /** Image assets; accepted only when the image vertical is on (it is off by default). */
  images: z.array(z.strictObject({ asset_id: z.string() })).optional(),
});
export type DecisionRequest = z.infer<typeof DecisionRequest>;

export const NoulAnswer = z.object({ type: z.literal("noul"), noul: z.number().min(0).max(1) });
export const ChoiceAnswer = z.object({
  type: z.literal("choice"),
  choice: z.string(),
  probabilities: z.record(z.string(), z.number().min(0).max(1)),
  confidence: z.number().min(0).max(1),
});
export const ScoreAnswer = z.object({
  type: z.literal("score"),
  score: z.number().min(0),
  confidence: z.number().min(0).max(1),
  legend: z.record(z.string(), JsonValue),
  probabilities: z.record(z.string(), z.number().min(0).max(1)),
});
export const Answer = z.discriminatedUnion("type", [NoulAnswer, ChoiceAnswer, ScoreAnswer]);
export type Answer = z.infer<typeof Answer>;
export type NoulAnswer = z.infer<typeof NoulAnswer>;
export type ChoiceAnswer = z.infer<typeof ChoiceAnswer>;
export type ScoreAnswer = z.infer<typeof ScoreAnswer>;

export const Usage = z.object({
  /** Every token the runtime processed, all passes together. */
  input_tokens: z.number().int().nonnegative(),
  /** Answer positions read: one per pass. */
  output_tokens: z.number().int().nonnegative(),
  /** Logical input for billing; present only where the runtime supplies it (absent is not zero). */
  billable_input_tokens: z.number().int().nonnegative().optional(),
});
export type Usage = z.infer<typeof Usage>;

export const DecisionResponse = z.object({
  model: z.string(),
  answers: z.record(z.string(), Answer),
  usage: Usage,
});
export type DecisionResponse = z.infer<typeof DecisionResponse>;
