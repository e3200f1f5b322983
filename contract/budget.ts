/**
 * The worst-case input tokens of a decision request, computed from the request alone: no template,
 * no tokenizer. The edge reserves this figure against the account's token quota and refuses a
 * request over LIMITS.reservedInputTokensPerRequest; a client can check it before sending.
 *
 *     requestTokenBound({ state: "charged twice", questions: { q: { type: "noul" } } }); // 1042
 *     budgetViolation(request); // null, or the 422 message
 *
 * Why it bounds every rendering: a token decodes to at least one UTF-8 byte, so a pass's bytes (plus
 * one beginning-of-sequence token) bound its tokens. Whatever text the sidecar's rendering wraps
 * around the content, a pass holds at most PASS_ALLOWANCE_BYTES of it, plus the state, the
 * question's instructions, and each option, level or criterion it offers with at most
 * ITEM_ALLOWANCE_BYTES of its own wrapping (`passBound`); the sidecar's rendering is held to this by a
 * property test. Content is counted as it is read: text as it is, anything else as compact JSON.
 *
 * Passes: a noul or a score question is one pass, a choice of at most LIMITS.choiceOptionsPerPass
 * options too, and each of these may be read a second time about a content-free state of at most
 * CONTENT_FREE_STATE_MAX_BYTES (contextual calibration); a choice of at most
 * LIMITS.choiceBothOrdersMaxOptions options is read so twice (its options in key order and reversed);
 * a choice of more than
 * LIMITS.choiceOptionsPerPass options is read in ceil(n / per pass) chunk passes, each option in
 * exactly one of them, plus one final pass over at most LIMITS.choiceOptionsPerPass leaders.
 */
import type { DecisionRequest, Question } from "./decision.ts";
import { stringifyJson } from "./json.ts";
import { LIMITS } from "./limits.ts";

/** Template text a pass may add around its content (instructions to the model, markers). */
export const PASS_ALLOWANCE_BYTES = 512;
/** Wrapping a pass may add around each option, level or criterion (its label, separators). */
export const ITEM_ALLOWANCE_BYTES = 32;
/** The state of a content-free pass, which a single-pass question may add to calibrate against. */
export const CONTENT_FREE_STATE_MAX_BYTES = 16;

const encoder = new TextEncoder();

/** UTF-8 bytes of a content value as the model reads it: text as it is, anything else as compact JSON. */
export function contentBytes(value: unknown): number {
  if (value === undefined || value === null) return 0;
  return encoder.encode(typeof value === "string" ? value : stringifyJson(value)).length;
}

/** Token bound of one pass offering `itemBytes` (each item's content bytes) about a state. */
export function passBound(stateBytes: number, instructionsBytes: number, itemBytes: readonly number[]): number {
  return 1 + PASS_ALLOWANCE_BYTES + stateBytes + instructionsBytes + itemBytes.reduce((sum, b) => sum + ITEM_ALLOWANCE_BYTES + b, 0);
}

/** Content bytes of each item a question offers: noul criteria, choice options (name and description), score levels. */
export function itemBytes(q: Question): number[] {
  if (q.type === "noul") return [q.criteria?.true, q.criteria?.false].filter((v) => v !== undefined && v !== null).map(contentBytes);
  if (q.type === "score") return q.criteria.map(contentBytes);
  return [...q.criteria].map(([name, description]) => contentBytes(name) + contentBytes(description));
}

/** Token bound of every pass of one question, the worst final pass of a large choice included. */
export function questionTokenBound(stateBytes: number, q: Question): number {
  const instructions = contentBytes(q.instructions);
  const items = itemBytes(q);
  const perPass = LIMITS.choiceOptionsPerPass;
  if (q.type !== "choice" || items.length <= perPass) {
    const readings = q.type === "choice" && items.length <= LIMITS.choiceBothOrdersMaxOptions ? 2 : 1;
    return readings * (passBound(stateBytes, instructions, items) + passBound(CONTENT_FREE_STATE_MAX_BYTES, instructions, items));
  }
  const chunks = Math.ceil(items.length / perPass);
  // Every option sits in exactly one chunk; the final pass offers at most `perPass` of the largest.
  const chunkPasses = chunks * passBound(stateBytes, instructions, []) + items.reduce((sum, b) => sum + ITEM_ALLOWANCE_BYTES + b, 0);
  const largest = [...items].sort((a, b) => b - a).slice(0, perPass);
  return chunkPasses + passBound(stateBytes, instructions, largest);
}

/** Worst-case input tokens of a whole request: what quota admission reserves. */
export function requestTokenBound(request: Pick<DecisionRequest, "state" | "questions">): number {
  const stateBytes = contentBytes(request.state);
  let total = 0;
  for (const question of request.questions.values()) total += questionTokenBound(stateBytes, question);
  return total;
}

/** The 422 message when a request may need more input tokens than one request may reserve; null otherwise. */
export function budgetViolation(request: Pick<DecisionRequest, "state" | "questions">): string | null {
  const bound = requestTokenBound(request);
  const max = LIMITS.reservedInputTokensPerRequest;
  if (bound <= max) return null;
  return `questions: this request may need ${bound} input tokens; at most ${max} per request (fewer questions or a shorter state)`;
}

/**
 * The 422 message a request valid in shape still earns (images, the request token bound), or null:
 * the same for a real-time request, a bulk record and a training example.
 */
export function requestViolation(request: Pick<DecisionRequest, "state" | "questions" | "images">): string | null {
  if (request.images !== undefined) return "images: image decisions are not enabled on this service";
  return budgetViolation(request);
}
