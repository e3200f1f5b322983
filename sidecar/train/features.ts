/**
 * What a trained text head reads of an example (runs in the sidecar: the training worker stores it,
 * a trained release reads it again for each request). One pass per question, the served rendering's
 * first content pass with the state as its prefix, gives three blocks:
 *
 * - `answer_state`: the base's final hidden state at the answer position (n_embd numbers);
 * - `pooled_state`: the state's final hidden states averaged (runtime-protocol.ts `pooled_state`);
 * - `label_logprobs`: the pass's own label log-probabilities, the zero-shot reading before any
 *   calibration (one number per outcome);
 * - `sentence_embedding`: the state's embedding by the runtime's sentence encoder (runtime-protocol.ts
 *   `/v1/embed`), one per example, the same for every question; empty where the runtime has none.
 *
 * An example's stored features are every question's first three blocks in that order, the questions
 * in the task's order; its embedding is stored beside them with the encoder's fingerprint. A head
 * names the blocks it reads (HeadParams `inputs`), chosen per job by cross-validation (head.ts
 * chooseHead).
 *
 *     const flat = flattenReads(reads);                       // what commitExample stores
 *     const reads = splitReads(flat, [2, 5], embedding);      // outcomes per question; the embedding or null
 *     headInput(reads[0], ["pooled_state", "label_logprobs"]);
 */
import type { FeatureBlock } from "../../server-shared/trained.ts";

export type QuestionRead = Record<FeatureBlock, number[]>;

export function flattenReads(reads: readonly QuestionRead[]): number[] {
  return reads.flatMap((r) => [...r.answer_state, ...r.pooled_state, ...r.label_logprobs]);
}

/** The inverse of flattenReads, given each question's number of outcomes (its label log-probabilities) and the example's embedding (null: none). */
export function splitReads(features: readonly number[], outcomes: readonly number[], embedding: readonly number[] | null = null): QuestionRead[] {
  const labels = outcomes.reduce((s, k) => s + k, 0);
  const width = (features.length - labels) / (2 * outcomes.length);
  if (!Number.isInteger(width) || width <= 0) throw new Error(`stored features of length ${features.length} do not split into ${outcomes.length} question(s) of ${outcomes.join(", ")} outcomes`);
  let at = 0;
  const take = (n: number) => features.slice(at, (at += n));
  return outcomes.map((k) => ({ answer_state: take(width), pooled_state: take(width), label_logprobs: take(k), sentence_embedding: embedding ? [...embedding] : [] }));
}

/** The numbers a head reads: the blocks it names, in FEATURE_BLOCKS order. */
export function headInput(read: QuestionRead, inputs: readonly FeatureBlock[]): number[] {
  return inputs.flatMap((block) => read[block]);
}
