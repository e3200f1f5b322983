/**
 * The real-time decision request and response (also the body of a bulk record), compatible with the
 * third-party "System One" clients. Every bound comes from LIMITS; the edge validates once with these
 * schemas and nothing malformed reaches the sidecar.
 *
 * Key order is meaning: the order of `questions` is the order of `answers`, and the order of a
 * choice's `criteria` is the outcome order used for ties and the order of `probabilities`. So the
 * maps keyed by client names (question ids, option names, answers) are `Map`s in the parsed form
 * (contract/json.ts reads request text into Maps; a plain object is accepted too, in its JS key
 * order), and every JSON value inside a request (state, instructions, descriptions, levels) may hold
 * Maps. Write them back with `stringifyJson`, which keeps the order.
 *
 *     POST /v1/systemone
 *     { "model": "svc-shared", "state": {...} | [...] | "text",
 *       "questions": { "q1": { "type": "noul", "instructions": "Is it urgent?" },
 *                      "q2": { "type": "choice", "criteria": { "billing": null, "bug": "a defect" } },
 *                      "q3": { "type": "score", "criteria": ["none", "some", "severe"] } } }
 */
import { z } from "zod";
import { fields, JsonValue, looseFields, orderedMap } from "./fields.ts";
import { toRecord, type Json } from "./json.ts";
import { LIMITS, SHARED_ALIAS } from "./limits.ts";

/** Text, a JSON object or array, or null/absent. */
const Instructions = z
  .custom<Json>((v) => v === null || typeof v === "string" || (typeof v === "object" && v !== null), "instructions must be text, a JSON object or array, or null")
  .optional();

const Description = JsonValue.nullable().optional();

export const NoulQuestion = z.strictObject({
  type: z.literal("noul"),
  instructions: Instructions,
  /** What true and false mean; either may be left out. */
  criteria: fields({ true: Description, false: Description }).nullable().optional(),
});

export const OptionName = z.string().min(1, "option names must not be empty").max(200, "option names must be at most 200 characters");

export const ChoiceQuestion = z.strictObject({
  type: z.literal("choice"),
  instructions: Instructions,
  /** Option name -> description (may be null). Key order is the outcome order used for ties. */
  criteria: orderedMap(OptionName, Description)
    .refine((options) => options.size >= LIMITS.choiceOptions.min, `a choice needs at least ${LIMITS.choiceOptions.min} options`)
    .refine((options) => options.size <= LIMITS.choiceOptions.max, `a choice has at most ${LIMITS.choiceOptions.max} options`),
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

export const Question = z.preprocess(
  toRecord,
  z.discriminatedUnion("type", [NoulQuestion, ChoiceQuestion, ScoreQuestion], {
    error: (issue) => (issue.code === "invalid_union" ? 'type must be "noul", "choice" or "score"' : undefined),
  }),
);
export type Question = z.infer<typeof Question>;
export type NoulQuestion = z.infer<typeof NoulQuestion>;
export type ChoiceQuestion = z.infer<typeof ChoiceQuestion>;
export type ScoreQuestion = z.infer<typeof ScoreQuestion>;

export const QUESTION_ID_MAX = 200;
export const QuestionId = z.string().min(1, "question ids must not be empty").max(QUESTION_ID_MAX, `question ids must be at most ${QUESTION_ID_MAX} characters`);

/** Question id -> question, in request order (the order of the answers). */
export const Questions = orderedMap(QuestionId, Question).refine((questions) => questions.size > 0, "questions must hold at least one question");

/** The state the questions are about: a JSON object, an array or text. */
export const State = z.custom<Json>((v) => typeof v === "string" || (typeof v === "object" && v !== null), "state must be a JSON object, an array or text");

export const DecisionRequest = looseFields({
  /** Alias or release id; the shared alias when absent (the tools always send one). */
  model: z.string().min(1, "model must not be empty").max(200, "model must be at most 200 characters").default(SHARED_ALIAS),
  state: State,
  questions: Questions,
  /** Image assets; accepted only when the image vertical is on (it is off by default). */
  images: z.array(fields({ asset_id: z.string() })).optional(),
});
export type DecisionRequest = z.infer<typeof DecisionRequest>;

const Probability = z.number().min(0).max(1);
/**
 * The share of the model's next-token probability that fell on the offered labels, averaged over
 * the passes that read the answer: how well the question suited the model. Not in the third-party
 * interface (its clients ignore it); absent where a runtime cannot tell.
 */
const OptionMass = Probability.optional();

export const NoulAnswer = looseFields({ type: z.literal("noul"), noul: Probability, option_mass: OptionMass });
export const ChoiceAnswer = looseFields({
  type: z.literal("choice"),
  choice: z.string(),
  /** Option name -> probability, in the criteria's order. */
  probabilities: orderedMap(z.string(), Probability),
  confidence: Probability,
  option_mass: OptionMass,
  /**
   * An image decision's native unknown mass: the model's probability that the image shows none of
   * the answers ("Needs review" when it is the largest). The answers' probabilities are then
   * conditional on a known answer, and `confidence` is the concentration of the whole distribution
   * (answers and unknown), not a calibrated probability of being right. Absent for text.
   */
  unknown_probability: Probability.optional(),
});
export const ScoreAnswer = looseFields({
  type: z.literal("score"),
  score: z.number().min(0),
  confidence: Probability,
  /** "0".."n-1" -> the level exactly as the request gave it. */
  legend: orderedMap(z.string(), JsonValue),
  /** "0".."n-1" -> probability. */
  probabilities: orderedMap(z.string(), Probability),
  option_mass: OptionMass,
});
export const Answer = z.union([NoulAnswer, ChoiceAnswer, ScoreAnswer]);
export type Answer = z.infer<typeof Answer>;
export type NoulAnswer = z.infer<typeof NoulAnswer>;
export type ChoiceAnswer = z.infer<typeof ChoiceAnswer>;
export type ScoreAnswer = z.infer<typeof ScoreAnswer>;

export const Usage = looseFields({
  input_tokens: z
    .number()
    .int()
    .nonnegative()
    .describe(
      "Tokens the runtime actually evaluated for this request, all passes together: the rendered state once (every pass of a request shares it), " +
        "each pass's own tokens, and the content-free passes that were not already kept. What resource limits count.",
    ),
  output_tokens: z.number().int().nonnegative().describe("Answer positions read: one per pass evaluated."),
  billable_input_tokens: z
    .number()
    .int()
    .nonnegative()
    .optional()
    .describe(
      "The logical input, for billing: the rendered state once and each question's own tokens once, whatever passes the readout needed. " +
        "Absent where the runtime does not supply it; absent is not zero.",
    ),
});
export type Usage = z.infer<typeof Usage>;

export const DecisionResponse = looseFields({
  model: z.string(),
  /** Question id -> answer, in the request's order. */
  answers: orderedMap(z.string(), Answer),
  usage: Usage,
});
export type DecisionResponse = z.infer<typeof DecisionResponse>;
