/**
 * Real-time decisions as plain, typed objects: the request a caller writes, the answer per question
 * type, and the helpers that build questions. The wire shapes are contract/decision.ts; the service
 * validates every bound, so nothing here repeats them.
 *
 *     const reply = await client.systemOne({
 *       state: { ticket: "I was charged twice" },
 *       questions: { urgent: noul("Is it urgent?"), topic: choice(["billing", "bug", "other"]) },
 *     });
 *     reply.answers.urgent.noul;          // probability of true
 *     reply.answers.topic.choice;         // "billing" | "bug" | "other"
 *
 * Answers arrive as JSON objects, so their keys follow JavaScript's object order (integer-like keys
 * such as "2" and "10" first, ascending); read them by name. A request keeps the order it is given
 * in: pass a `Map` where names such as "10" and "2" must stay in that order.
 */

/** Any JSON value a request may carry (objects may be `Map`s, which keep their order). */
export type JsonInput = string | number | boolean | null | object;

/** A JSON value as answers carry it. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Text, a JSON object or array, or null. */
export type Instructions = string | object | null;

/** What an option or a truth value means: text, structured JSON, or null. */
export type Description = JsonInput;

export interface NoulQuestion {
  type: "noul";
  instructions?: Instructions;
  /** What true and false mean; either may be left out. */
  criteria?: { true?: Description; false?: Description } | null;
}

export interface ChoiceQuestion<O extends string = string> {
  type: "choice";
  instructions?: Instructions;
  /** Option name -> description (may be null), 2 to 255 options; the order is the tie order. */
  criteria: { readonly [K in O]: Description } | ReadonlyMap<O, Description>;
}

export interface ScoreQuestion {
  type: "score";
  instructions?: Instructions;
  /** The legend, level 0 first: 2 to 10 levels, each text or structured JSON (never null). */
  criteria: readonly (string | number | boolean | object)[];
}

export type Question = NoulQuestion | ChoiceQuestion | ScoreQuestion;

/** Question id -> question. */
export type Questions = { readonly [id: string]: Question };

export interface DecisionRequest<Q extends Questions = Questions> {
  /** Alias or release id; the client's `defaultModel` when absent. */
  model?: string;
  /** What the questions are about: text, a JSON object or an array. */
  state: string | object;
  questions: Q;
  /**
   * One ready image asset (`client.imageAssets.upload`) makes this an image decision, with a trained
   * image model and exactly its one `choice` question (only where the service's IMAGE_API is on).
   */
  images?: ReadonlyArray<{ asset_id: string }>;
}

export interface NoulAnswer {
  type: "noul";
  /** Probability of true. */
  noul: number;
  /** Share of the model's probability that fell on the offered labels; absent where unknown. */
  option_mass?: number;
}

export interface ChoiceAnswer<O extends string = string> {
  type: "choice";
  /** The most probable option. */
  choice: O;
  /** Option name -> probability. */
  probabilities: Record<O, number>;
  confidence: number;
  option_mass?: number;
  /**
   * An image decision's unknown mass: the model's probability that the image shows none of the
   * answers (show "Needs review" when it is the largest). `probabilities` are then conditional on a
   * known answer, and `confidence` is the concentration of the whole distribution, unknown included,
   * not a calibrated probability of being right. Absent for text.
   */
  unknown_probability?: number;
}

export interface ScoreAnswer {
  type: "score";
  /** Expected zero-based level. */
  score: number;
  confidence: number;
  /** "0".."n-1" -> the level as the request gave it. */
  legend: Record<string, JsonValue>;
  /** "0".."n-1" -> probability. */
  probabilities: Record<string, number>;
  option_mass?: number;
}

export type Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer;

/** The option names of a choice's criteria, an object or a Map. */
type OptionsOf<C> = C extends ReadonlyMap<infer O, unknown> ? O : keyof C;

/** The answer type of a question type. */
export type AnswerFor<Q> = Q extends { type: "noul" }
  ? NoulAnswer
  : Q extends { type: "choice"; criteria: infer C }
    ? ChoiceAnswer<Extract<OptionsOf<C>, string>>
    : Q extends { type: "score" }
      ? ScoreAnswer
      : Answer;

export interface Usage {
  /** Every token the model processed, all passes together. */
  input_tokens: number;
  output_tokens: number;
  /** Logical input for billing; absent on runtimes that do not report it (absent is not zero). */
  billable_input_tokens?: number;
}

export interface DecisionResponse<Q extends Questions = Questions> {
  /** The release that answered (may be the release behind the requested alias). */
  model: string;
  answers: { [K in keyof Q]: AnswerFor<Q[K]> };
  usage: Usage;
}

/**
 * A yes/no question.
 *
 *     questions: { refund: noul("Does the customer ask for a refund?") }
 */
export function noul(instructions?: Instructions, criteria?: NoulQuestion["criteria"]): NoulQuestion {
  return { type: "noul", ...(instructions === undefined ? {} : { instructions }), ...(criteria === undefined ? {} : { criteria }) };
}

/**
 * Pick one named option. `criteria` maps each option to its description (or null), or lists the
 * names. A list keeps its order exactly: it becomes an object, or a `Map` where an object would
 * reorder the names (integer-like names such as "10" and "2").
 *
 *     questions: { topic: choice({ billing: "money matters", bug: "a defect", other: null }, "What is it about?") }
 *     questions: { topic: choice(["billing", "bug", "other"]) }
 */
export function choice<const O extends string>(criteria: readonly O[] | { readonly [K in O]: Description }, instructions?: Instructions): ChoiceQuestion<O> {
  const options: ChoiceQuestion<O>["criteria"] = isNameList(criteria) ? fromNames(criteria) : criteria;
  return { type: "choice", criteria: options, ...(instructions === undefined ? {} : { instructions }) };
}

/**
 * Ordered levels, level 0 first; the answer is the expected level.
 *
 *     questions: { severity: score(["none", "minor", "major", "critical"], "How severe is it?") }
 */
export function score(criteria: ScoreQuestion["criteria"], instructions?: Instructions): ScoreQuestion {
  return { type: "score", criteria, ...(instructions === undefined ? {} : { instructions }) };
}

function fromNames<O extends string>(names: readonly O[]): ChoiceQuestion<O>["criteria"] {
  const object = Object.fromEntries(names.map((name) => [name, null])) as { [K in O]: null };
  const kept = Object.keys(object).every((name, i) => name === names[i]) && Object.keys(object).length === names.length;
  return kept ? object : new Map(names.map((name) => [name, null]));
}

function isNameList<O extends string>(criteria: readonly O[] | object): criteria is readonly O[] {
  return Array.isArray(criteria);
}
