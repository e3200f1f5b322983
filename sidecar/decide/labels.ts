/**
 * Label strings to token ids (runs in the sidecar, under Bun on the GPU host). The rendering reads
 * labels at the answer position; the runtime scores token ids. Two kinds of label exist:
 *
 *   - fixed forms ("Yes", " Yes", "0", " A", ...: render.ts FIXED_FORMS): each must be exactly one
 *     token of the served model that decodes back to itself, and no two forms may share a token. A
 *     model that fails this cannot be used with this rendering at all (LabelError, 503).
 *   - word labels (" Europe", " billing"): an option's first token is read. A question is read by
 *     words only when every first token is distinct and not blank; otherwise the rendering falls back
 *     to letters or digits, so customer text can never make two options share a token.
 *
 *     const fixed = labelCache.get(fingerprint)?.fixed ?? checkFixedForms(tokenized); // a tokenize call the first time: admission.ts
 *     const words = wordLabels([" Europe", " Asia"], known); // Map or null
 *     labelTokens(new Map([...fixed, ...words]), pass.labels); // [[8438, 10784, ...], [2301, ...]]
 */
import { FIXED_FORMS, type Label } from "./render.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import type { Tokenized } from "../../server-shared/runtime-protocol.ts";

/** Label form -> the token read for it, on one model. */
export type ResolvedLabels = ReadonlyMap<string, number>;

/**
 * Fixed-form tokens and the per-pass token limit, per runtime fingerprint. A fingerprint covers the
 * weights, the adapter and the rendering version, so its forms never change. Filled only from a
 * tokenize response whose stamp named the expected fingerprint (admission.ts), so a misrouted runtime
 * cannot poison it. (A runtime restarted with a smaller context keeps its fingerprint: a pass over
 * its new limit is then refused by the runtime itself, 422 `pass_too_long`, before evaluation.)
 */
export const labelCache = new Map<string, { fixed: ResolvedLabels; tokensPerPass: number }>();

/**
 * The model cannot be used with this rendering (a fixed form is not a single self-decoding token, or
 * two forms share one). The caller sees 503; the operator note names forms, never customer text.
 */
export class LabelError extends ServiceError {
  override readonly name = "LabelError";
  constructor(readonly problem: string) {
    super("unavailable", "the model cannot answer this question type", `release cannot be used with this rendering: ${problem}`);
  }
}

/** Checks the fixed forms' tokenization (`tokenized[i]` is FIXED_FORMS[i]'s); throws LabelError. */
export function checkFixedForms(tokenized: readonly Tokenized[]): ResolvedLabels {
  const resolved = new Map<string, number>();
  const owner = new Map<number, string>();
  FIXED_FORMS.forEach((form, i) => {
    const { tokens, pieces } = tokenized[i]!;
    if (tokens.length !== 1 || pieces[0] !== form) {
      throw new LabelError(`label ${JSON.stringify(form)} is ${tokens.length} token(s) decoding to ${JSON.stringify(pieces.join(""))}, not one token`);
    }
    const token = tokens[0]!;
    const other = owner.get(token);
    if (other !== undefined) throw new LabelError(`labels ${JSON.stringify(other)} and ${JSON.stringify(form)} share token ${token}`);
    owner.set(token, form);
    resolved.set(form, token);
  });
  return resolved;
}

/** A word's first token and the text it decodes to; token -1 for a word with no token at all. */
export interface FirstToken {
  token: number;
  piece: string;
}

export const firstToken = ({ tokens, pieces }: Tokenized): FirstToken => ({ token: tokens[0] ?? -1, piece: pieces[0] ?? "" });

/**
 * First tokens of words (option names, level texts) per runtime fingerprint, so that a question
 * asked again costs no tokenizing. A word's tokens on one fingerprint never change; like
 * `labelCache`, entries come only from stamped responses. Bounded: the oldest entries go first.
 */
export const wordCache = new Map<string, FirstToken>();
export const WORD_CACHE_ENTRIES = 100_000;
const wordKey = (fingerprint: string, word: string) => `${fingerprint}\u0000${word}`;

export function knownWord(fingerprint: string, word: string): FirstToken | undefined {
  return wordCache.get(wordKey(fingerprint, word));
}

export function learnWord(fingerprint: string, word: string, first: FirstToken): void {
  const key = wordKey(fingerprint, word);
  wordCache.delete(key);
  wordCache.set(key, first);
  for (const oldest of wordCache.keys()) {
    if (wordCache.size <= WORD_CACHE_ENTRIES) break;
    wordCache.delete(oldest);
  }
}

/**
 * The first tokens of `words` (each an option name or level text as render.ts `wordForm` writes it),
 * or null when they cannot label a question: a first token that is blank or does not decode to the
 * start of its word (a byte fragment), or two words that share one.
 */
export function wordLabels(words: readonly string[], known: (word: string) => FirstToken): ResolvedLabels | null {
  const resolved = new Map<string, number>();
  const seen = new Set<number>();
  for (const word of words) {
    const { token, piece } = known(word);
    if (token < 0 || piece.trim() === "" || !word.startsWith(piece) || seen.has(token)) return null;
    seen.add(token);
    resolved.set(word, token);
  }
  return resolved;
}

/** The token ids of a pass's labels, one group per label, in the pass's order. */
export function labelTokens(resolved: ResolvedLabels, labels: readonly Label[]): number[][] {
  return labels.map((forms) =>
    forms.map((form) => {
      const token = resolved.get(form);
      // A word label is customer text: the note says only which kind of label was missing.
      if (token === undefined) throw new LabelError(form.length <= 2 ? `label ${JSON.stringify(form)} was not resolved` : "a word label was not resolved");
      return token;
    }),
  );
}
