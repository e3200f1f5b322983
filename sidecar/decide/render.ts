/**
 * Rendering of questions into model passes (runs in the sidecar, under Bun on the GPU host). Changing
 * any text here changes answers: bump RENDERING_VERSION, which is part of every runtime fingerprint.
 *
 * A pass is a list of segments and the labels read at its answer position. Only the chat template's
 * own markers are `special`; customer text is never parsed for special tokens, so a state containing
 * "<end_of_turn>" cannot end a turn. In the served (completion) framing the first segment is the
 * rendered state, the pass's prefix: the runtime evaluates it once for all the passes of a request.
 *
 * The served rendering (`SERVED_RENDERING`) was chosen by measurement on the fitting part of the
 * quality benchmark (`npm run bench:quality`): a completion-style prompt ending in "Answer:" puts far
 * more of the default model's next-token mass on the labels than the chat framing did, and reading
 * the options' own first words beats reading letters. What was measured is in the benchmark's output.
 *
 *   - noul: labels Yes / No, each the sum of its surface forms ("Yes", " Yes", "yes", " yes").
 *   - choice of at most OPTIONS_PER_PASS options: the first token of each option's name (" Europe",
 *     " billing") when those tokens are distinct and not blank (`wordLabels`); otherwise letters,
 *     each the sum of " A" and "A".
 *   - score: the first token of each level's text under the same rule; otherwise digits after
 *     "Answer: " (the tokenizer splits " 3" into a space and the digit).
 *   - a larger choice is read in letter chunks plus a final pass over the leaders.
 *
 * Every pass stays within the template-independent bound of contract/budget.ts (`passBound`): at most
 * PASS_ALLOWANCE_BYTES of template text and ITEM_ALLOWANCE_BYTES of wrapping per option, level or
 * criterion. The edge reserves quota on that bound; a property test holds this file to it.
 */
import { stringifyJson } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import type { ChoiceQuestion, NoulQuestion, Question, ScoreQuestion } from "../../contract/decision.ts";
import type { Segment } from "../../server-shared/runtime-protocol.ts";

export { RENDERING_VERSION } from "../../server-shared/runtime-protocol.ts";

/**
 * One label: the surface forms whose probabilities are summed into it. A fixed form must be exactly
 * one token of the model; a word label's single form names the option, and its first token is read.
 */
export type Label = readonly string[];

export interface Pass {
  segments: Segment[];
  /**
   * How many leading segments are the pass's prefix (runtime-protocol.ts `prefix_segments`): the
   * rendered state, which every content pass of a request shares, as every content-free pass shares
   * its own. 0 for the chat framing, which the benchmark alone reads.
   */
  prefixSegments: number;
  /** The labels read at the answer position, in option order. */
  labels: Label[];
}

/** How a question is rendered: the served choice, or an earlier one kept for the benchmark to compare against. */
export interface Rendering {
  /** "completion": a plain prompt ending in "Answer:"; "chat": the model's chat turn, as render-v1 did. */
  framing: "completion" | "chat";
  /** Sum each label's surface forms (" Yes" and "yes" with "Yes"); false reads the first form only ("Yes", "A"), as render-v1 did. */
  labelForms: boolean;
  /** Read options and levels by their own first word where it tells them apart. */
  wordLabels: boolean;
}

export const SERVED_RENDERING: Rendering = { framing: "completion", labelForms: true, wordLabels: true };
/** The rendering before the quality work (render-v1): chat framing, one form per label, letters and digits. */
export const CHAT_RENDERING: Rendering = { framing: "chat", labelForms: false, wordLabels: false };

export const NOUL_FORMS = [
  ["Yes", " Yes", "yes", " yes"],
  ["No", " No", "no", " no"],
] as const;
export const SCORE_DIGITS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"] as const;
/** Options one pass can offer; a larger choice is read in chunks plus a final pass over the leaders. */
export const CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".split("");
export const OPTIONS_PER_PASS = LIMITS.choiceOptionsPerPass;
if (CHOICE_LETTERS.length !== OPTIONS_PER_PASS) throw new Error("one choice letter per option a pass offers");
/** Every fixed surface form a rendering may read; each must be one token of the model (labels.ts checks). */
export const FIXED_FORMS: readonly string[] = [...NOUL_FORMS.flat(), ...SCORE_DIGITS, ...CHOICE_LETTERS, ...CHOICE_LETTERS.map((l) => ` ${l}`)];
/** The final pass re-reads the smallest top set of options holding at least this much probability. */
export const FINALIST_MASS = 0.99;
/**
 * The state of a question's content-free pass (contextual calibration): the same question about
 * nothing, whose label distribution is the model's prior to divide out. At most
 * CONTENT_FREE_STATE_MAX_BYTES (contract/budget.ts).
 */
export const CONTENT_FREE_STATE = "N/A";
/**
 * With the `bothOrders` step (served: steps.ts SERVED_STEPS), a choice of at most this many options is
 * read in key order and in reverse, and the two averaged; the edge's reservation (contract/budget.ts)
 * counts both readings.
 */
export const BOTH_ORDERS_MAX_OPTIONS = LIMITS.choiceBothOrdersMaxOptions;

// Gemma's chat turn markers (the default model's template), used by the chat framing only.
const TURN_OPEN: Segment = { text: "<start_of_turn>user\n", special: true };
const TURN_CLOSE: Segment = { text: "<end_of_turn>\n<start_of_turn>model\n", special: true };

const encoder = new TextEncoder();
export const utf8Bytes = (text: string) => encoder.encode(text).length;

/** Text of a JSON value as the model reads it: strings as they are, anything else as compact JSON in document order. */
export function asText(value: unknown): string {
  return typeof value === "string" ? value : stringifyJson(value);
}

/** The text a word label is read from: the option name or level text as it follows "Answer:". */
export function wordForm(text: string): string {
  return ` ${text}`;
}

function pass(r: Rendering, stateText: string, body: string, answer: { chat: string; completion: string }, labels: Label[]): Pass {
  if (r.framing === "chat") {
    const text = `You answer a question about the state below.\n\nState:\n${stateText}\n\n${body}\n${answer.chat}`;
    return { segments: [TURN_OPEN, { text, special: false }, TURN_CLOSE], prefixSegments: 0, labels };
  }
  // The state is its own segment, tokenized on its own, so that its tokens are the same whatever follows.
  const prefix = { text: `State:\n${stateText}\n\n`, special: false };
  return { segments: [prefix, { text: `${body}\n${answer.completion}`, special: false }], prefixSegments: 1, labels };
}

function instructionsLine(instructions: unknown, fallback: string): string {
  return instructions === undefined || instructions === null ? fallback : asText(instructions);
}

const forms = (r: Rendering, all: readonly string[]): Label => (r.labelForms ? all : [all[0]!]);

export function renderNoul(r: Rendering, stateText: string, q: NoulQuestion): Pass {
  const lines = [`Question: ${instructionsLine(q.instructions, "Is the statement true of the state?")}`];
  if (q.criteria?.true != null) lines.push(`Answer Yes if: ${asText(q.criteria.true)}`);
  if (q.criteria?.false != null) lines.push(`Answer No if: ${asText(q.criteria.false)}`);
  return pass(r, stateText, lines.join("\n"), { chat: "Answer with Yes or No only.", completion: "Answer:" }, NOUL_FORMS.map((f) => forms(r, f)));
}

/** The body of a pass that lists items under a heading. */
function listBody(question: string, heading: string, items: string[]): string {
  return [`Question: ${question}`, heading, ...items].join("\n");
}

/**
 * A score question's levels, read by their own words (`words`: each level is text and the caller
 * found their first tokens distinct) or by digits.
 */
export function renderScore(r: Rendering, stateText: string, q: ScoreQuestion, words: boolean): Pass {
  const question = instructionsLine(q.instructions, "Which level fits the state best?");
  if (words) {
    const levels = q.criteria.map((level) => `- ${asText(level)}`);
    return pass(r, stateText, listBody(question, "Levels:", levels), WORD_ANSWER, q.criteria.map((level) => [wordForm(asText(level))]));
  }
  const levels = q.criteria.map((level, i) => `${i}: ${asText(level)}`);
  const answer = { chat: "Answer with the number of one level only.", completion: "Answer: " };
  return pass(r, stateText, listBody(question, "Levels:", levels), answer, SCORE_DIGITS.slice(0, q.criteria.length).map((d) => [d]));
}

const WORD_ANSWER = { chat: "Answer with one of them only.", completion: "Answer:" };

function optionLine(q: ChoiceQuestion, name: string, label: string | null): string {
  const description = q.criteria.get(name);
  const head = label === null ? `- ${name}` : `${label}: ${name}`;
  if (description === null || description === undefined) return head;
  return label === null ? `${head}: ${asText(description)}` : `${head} - ${asText(description)}`;
}

/**
 * One pass offering `options` (names, at most OPTIONS_PER_PASS) of a choice question, read by the
 * options' own words (`words`: the caller found their first tokens distinct) or by letters.
 */
export function renderChoice(r: Rendering, stateText: string, q: ChoiceQuestion, options: string[], words = false): Pass {
  const question = instructionsLine(q.instructions, "Which option fits the state best?");
  if (words) {
    const lines = options.map((name) => optionLine(q, name, null));
    return pass(r, stateText, listBody(question, "Options:", lines), WORD_ANSWER, options.map((name) => [wordForm(name)]));
  }
  const lines = options.map((name, i) => optionLine(q, name, CHOICE_LETTERS[i]!));
  const answer = { chat: "Answer with the letter of one option only.", completion: "Answer:" };
  return pass(r, stateText, listBody(question, "Options:", lines), answer, options.map((_, i) => forms(r, [CHOICE_LETTERS[i]!, ` ${CHOICE_LETTERS[i]!}`])));
}

/** Options split into balanced chunks of at most OPTIONS_PER_PASS, in key order. */
export function choiceChunks(options: string[]): string[][] {
  if (options.length <= OPTIONS_PER_PASS) return [options];
  const count = Math.ceil(options.length / OPTIONS_PER_PASS);
  const size = Math.ceil(options.length / count);
  const chunks: string[][] = [];
  for (let i = 0; i < options.length; i += size) chunks.push(options.slice(i, i + size));
  return chunks;
}

/** Upper bound of segments' tokens: their UTF-8 bytes (a token is at least one byte). */
export function segmentsTokenBound(segments: readonly { text: string }[]): number {
  return segments.reduce((sum, s) => sum + utf8Bytes(s.text), 0);
}

/** Upper bound of a pass's tokens: its segments' bound plus the beginning-of-sequence token. */
export function passTokenBound(p: Pass): number {
  return 1 + segmentsTokenBound(p.segments);
}

/** The texts a question could be read by as words (option names, text levels); null when it cannot be. */
export function wordCandidates(r: Rendering, q: Question): string[] | null {
  if (!r.wordLabels || q.type === "noul") return null;
  if (q.type === "score") return q.criteria.every((level) => typeof level === "string") ? q.criteria.map((level) => wordForm(level as string)) : null;
  return q.criteria.size <= OPTIONS_PER_PASS ? [...q.criteria.keys()].map(wordForm) : null;
}

/** One reading of a single-pass question: the pass about the state, and its content-free twin. */
export interface Reading {
  pass: Pass;
  /** The same pass about CONTENT_FREE_STATE (contextual calibration); null when not read. */
  contentFree: Pass | null;
}

export interface QuestionPlan {
  /**
   * A single-pass question's readings: the options in key order, then (a small choice read in both
   * orders) in reverse key order. Empty for a choice read in chunks.
   */
  readings: Reading[];
  /** A large choice's chunk passes, in key order; empty otherwise. */
  chunks: Pass[];
  /**
   * For a choice read in chunks: the token bound of the worst final pass, the one offering the
   * OPTIONS_PER_PASS longest options. Null when no final pass is needed.
   */
  finalPassBound: number | null;
}

/** Every pass a plan names before execution (a chunked choice's final pass is not known yet). */
export function plannedPasses(plan: QuestionPlan): Pass[] {
  return [...plan.readings.flatMap((r) => (r.contentFree ? [r.pass, r.contentFree] : [r.pass])), ...plan.chunks];
}

/**
 * The passes of one question. `words`: the caller tokenized `wordCandidates` and found them usable.
 * `contextual`: add the content-free pass of each reading (a chunked choice is not calibrated
 * against content, which would double its many passes). `bothOrders`: read a choice of at most
 * BOTH_ORDERS_MAX_OPTIONS options a second time in reverse order, to average out position bias.
 */
export function planQuestion(
  r: Rendering,
  stateText: string,
  q: Question,
  opts: { words: boolean; contextual: boolean; bothOrders?: boolean },
): QuestionPlan {
  const reading = (render: (state: string) => Pass): Reading => ({
    pass: render(stateText),
    contentFree: opts.contextual ? render(CONTENT_FREE_STATE) : null,
  });
  const single = (readings: Reading[]): QuestionPlan => ({ readings, chunks: [], finalPassBound: null });
  if (q.type === "noul") return single([reading((s) => renderNoul(r, s, q))]);
  if (q.type === "score") return single([reading((s) => renderScore(r, s, q, opts.words))]);
  const options = [...q.criteria.keys()];
  const chunks = choiceChunks(options);
  if (chunks.length === 1) {
    const readings = [reading((s) => renderChoice(r, s, q, options, opts.words))];
    if (opts.bothOrders && options.length <= BOTH_ORDERS_MAX_OPTIONS) readings.push(reading((s) => renderChoice(r, s, q, [...options].reverse(), opts.words)));
    return single(readings);
  }
  const passes = chunks.map((chunk) => renderChoice(r, stateText, q, chunk));
  const lineBytes = new Map(options.map((name) => [name, utf8Bytes(optionLine(q, name, "A"))]));
  const longest = [...options].sort((a, b) => lineBytes.get(b)! - lineBytes.get(a)!).slice(0, OPTIONS_PER_PASS);
  return { readings: [], chunks: passes, finalPassBound: passTokenBound(renderChoice(r, stateText, q, longest)) };
}
