/**
 * Rendering of questions into model passes (runs in the sidecar, under Bun on the GPU host). Changing
 * any text here changes answers: bump RENDERING_VERSION, which is part of every runtime fingerprint.
 *
 * A pass is a list of segments. Only the chat template's own markers are `special`; customer text is
 * never parsed for special tokens, so a state containing "<end_of_turn>" cannot end the turn.
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

export interface Pass {
  segments: Segment[];
  /** The single-token labels read at the answer position, in option order. */
  labels: string[];
}

export const NOUL_LABELS = ["Yes", "No"] as const;
export const SCORE_LABELS = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"] as const;
/** Options one pass can offer; a larger choice is read in chunks plus a final pass over the leaders. */
export const CHOICE_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ".split("");
export const OPTIONS_PER_PASS = LIMITS.choiceOptionsPerPass;
if (CHOICE_LABELS.length !== OPTIONS_PER_PASS) throw new Error("one choice label per option a pass offers");
/** The final pass re-reads the smallest top set of options holding at least this much probability. */
export const FINALIST_MASS = 0.99;

// Gemma's chat turn markers (the default model's template).
const TURN_OPEN: Segment = { text: "<start_of_turn>user\n", special: true };
const TURN_CLOSE: Segment = { text: "<end_of_turn>\n<start_of_turn>model\n", special: true };

const encoder = new TextEncoder();
export const utf8Bytes = (text: string) => encoder.encode(text).length;

/** Text of a JSON value as the model reads it: strings as they are, anything else as compact JSON in document order. */
export function asText(value: unknown): string {
  return typeof value === "string" ? value : stringifyJson(value);
}

function pass(stateText: string, body: string, labels: string[]): Pass {
  const text = `You answer a question about the state below.\n\nState:\n${stateText}\n\n${body}`;
  return { segments: [TURN_OPEN, { text, special: false }, TURN_CLOSE], labels };
}

function instructionsLine(instructions: unknown, fallback: string): string {
  return instructions === undefined || instructions === null ? fallback : asText(instructions);
}

export function renderNoul(stateText: string, q: NoulQuestion): Pass {
  const lines = [`Question: ${instructionsLine(q.instructions, "Is the statement true of the state?")}`];
  if (q.criteria?.true != null) lines.push(`Answer Yes if: ${asText(q.criteria.true)}`);
  if (q.criteria?.false != null) lines.push(`Answer No if: ${asText(q.criteria.false)}`);
  lines.push("Answer with Yes or No only.");
  return pass(stateText, lines.join("\n"), [...NOUL_LABELS]);
}

/** The body of a pass that lists labelled items under a heading. */
function listBody(question: string, heading: string, items: string[], closing: string): string {
  return [`Question: ${question}`, heading, ...items, closing].join("\n");
}

export function renderScore(stateText: string, q: ScoreQuestion): Pass {
  const levels = q.criteria.map((level, i) => `${i}: ${asText(level)}`);
  const question = instructionsLine(q.instructions, "Which level fits the state best?");
  return pass(stateText, listBody(question, "Levels:", levels, "Answer with the number of one level only."), SCORE_LABELS.slice(0, q.criteria.length));
}

function optionLine(q: ChoiceQuestion, name: string, label: string): string {
  const description = q.criteria.get(name);
  return description === null || description === undefined ? `${label}: ${name}` : `${label}: ${name} - ${asText(description)}`;
}

/** One pass offering `options` (names, at most OPTIONS_PER_PASS) of a choice question. */
export function renderChoice(stateText: string, q: ChoiceQuestion, options: string[]): Pass {
  const lines = options.map((name, i) => optionLine(q, name, CHOICE_LABELS[i]!));
  const question = instructionsLine(q.instructions, "Which option fits the state best?");
  return pass(stateText, listBody(question, "Options:", lines, "Answer with the letter of one option only."), CHOICE_LABELS.slice(0, options.length));
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

/** Upper bound of a pass's tokens: its UTF-8 bytes plus the beginning-of-sequence token. */
export function passTokenBound(p: Pass): number {
  return 1 + p.segments.reduce((sum, s) => sum + utf8Bytes(s.text), 0);
}

export interface QuestionPlan {
  /** Passes known before execution (a large choice's chunks; otherwise its single pass). */
  passes: Pass[];
  /**
   * For a choice read in chunks: the token bound of the worst final pass, the one offering the
   * OPTIONS_PER_PASS longest options. Null when no final pass is needed.
   */
  finalPassBound: number | null;
}

export function planQuestion(stateText: string, q: Question): QuestionPlan {
  if (q.type === "noul") return { passes: [renderNoul(stateText, q)], finalPassBound: null };
  if (q.type === "score") return { passes: [renderScore(stateText, q)], finalPassBound: null };
  const options = [...q.criteria.keys()];
  const chunks = choiceChunks(options);
  const passes = chunks.map((chunk) => renderChoice(stateText, q, chunk));
  if (chunks.length === 1) return { passes, finalPassBound: null };
  const lineBytes = new Map(options.map((name) => [name, utf8Bytes(optionLine(q, name, "A"))]));
  const longest = [...options].sort((a, b) => lineBytes.get(b)! - lineBytes.get(a)!).slice(0, OPTIONS_PER_PASS);
  return { passes, finalPassBound: passTokenBound(renderChoice(stateText, q, longest)) };
}
