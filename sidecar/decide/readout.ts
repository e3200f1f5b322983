/**
 * The probability readout (runs in the sidecar, under Bun on the GPU host): label log-probabilities
 * from the runtime's passes in, typed answers out. Pure functions, no I/O; the formulas are those of
 * the project's runtime-readout notes (softmax over the labels, argmax, expected level, chunk merge).
 *
 *     const p = probabilities(score.logprobs);          // softmax over the labels offered
 *     noulAnswer(p);                                    // { type: "noul", noul: 0.93 }
 *     choiceAnswer(["billing", "bug"], p);              // { type: "choice", choice: "billing", ... }
 *
 * A choice read in several chunk passes goes through `chunkProbabilities`, `selectFinalists`, one
 * final pass over the finalists, and `mergeChunks`.
 *
 * Every function returns finite probabilities in [0, 1] that sum to 1 within 1e-9, whatever the
 * log-probabilities (the runtime's float32 floor, all equal, spreads of hundreds of nats).
 */
import type { Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer } from "../../contract/decision.ts";
import { LOGPROB_FLOOR } from "../../server-shared/runtime-protocol.ts";
import { applyPlatt, applyTemperature, type Calibration } from "./calibration.ts";
import type { Json } from "../../contract/json.ts";
import { FINALIST_MASS, OPTIONS_PER_PASS } from "./render.ts";

/**
 * How `confidence` is defined, per answer type; the README quotes these lines. Both definitions are
 * clamped to [0, 1], and neither is a calibrated probability of being correct.
 */
export const CONFIDENCE_DEFINITIONS = {
  noul: "none: the third-party interface has no confidence for noul; `noul` itself is p(true).",
  choice:
    "normalised peak (n·p_max − 1) / (n − 1) over the n options: 0 when every option is equally likely, " +
    "1 when one option holds all the probability.",
  score:
    "1 − σ / σ_max, σ the standard deviation of the level distribution and σ_max = (n − 1) / 2 the largest " +
    "that n levels allow: 1 when one level holds all the probability, 0 when the probability is split evenly " +
    "between the lowest and the highest level; a spread over neighbouring levels costs less than one over distant levels.",
} as const;

/**
 * Softmax over the labels' log-probabilities (float64, shifted by the maximum so that nothing
 * overflows and the largest term is exactly 1). A value of −∞ counts as probability 0; when every
 * value is −∞ nothing distinguishes the labels, so they are equally likely. A release's temperature
 * is applied afterwards, to the answer (`calibratedAnswer`).
 */
export function probabilities(logprobs: readonly number[]): number[] {
  if (logprobs.length === 0) throw new RangeError("no log-probabilities to normalise");
  for (const lp of logprobs) {
    if (Number.isNaN(lp) || lp === Infinity) throw new RangeError(`log-probabilities must be finite or -Infinity, got ${lp}`);
  }
  const max = Math.max(...logprobs);
  if (max === -Infinity) return logprobs.map(() => 1 / logprobs.length);
  // lp - max is <= 0, so each term is in [0, 1] and the maximum's term is 1: the sum is >= 1.
  return normalise(logprobs.map((lp) => Math.exp(lp - max)));
}

/**
 * Each label's log-probability from the runtime's values for its forms' tokens (`groups[i]` forms
 * of label i, in the flat order the runtime scored them): log Σ exp over the forms, so " Yes" and
 * "yes" add up to one label.
 */
export function labelLogprobs(flat: readonly number[], groups: readonly (readonly number[])[]): number[] {
  const sizes = groups.map((g) => g.length);
  if (sizes.reduce((a, b) => a + b, 0) !== flat.length) throw new RangeError(`${flat.length} log-probabilities for ${sizes.join("+")} label forms`);
  let at = 0;
  return sizes.map((size) => {
    const values = flat.slice(at, (at += size));
    const max = Math.max(...values);
    return max === -Infinity ? -Infinity : max + Math.log(values.reduce((sum, lp) => sum + Math.exp(lp - max), 0));
  });
}

/**
 * The option mass of a pass: the share of the model's full next-token probability that fell on the
 * offered labels. Low mass means the prompt did not fit the question and the normalised
 * probabilities describe little.
 */
export function optionMass(logprobs: readonly number[]): number {
  return clamp01(logprobs.reduce((sum, lp) => sum + Math.exp(lp), 0));
}

/**
 * Contextual calibration (Zhao et al., 2021): the label distribution of a pass divided by that of the
 * same question about a content-free state, renormalised: `p_i ∝ p_i / p_cf,i`. It removes the
 * model's prior towards a label or a position that the question alone causes.
 */
export function contextualProbabilities(logprobs: readonly number[], contentFreeLogprobs: readonly number[]): number[] {
  if (logprobs.length !== contentFreeLogprobs.length) throw new RangeError(`${logprobs.length} labels but ${contentFreeLogprobs.length} content-free values`);
  // The runtime floors both at LOGPROB_FLOOR; flooring again here keeps every difference finite.
  const floored = (lp: number) => Math.max(lp, LOGPROB_FLOOR);
  return probabilities(logprobs.map((lp, i) => floored(lp) - floored(contentFreeLogprobs[i]!)));
}

/** The mean of distributions over the same labels (one reading per option order), renormalised. */
export function meanDistribution(distributions: readonly (readonly number[])[]): number[] {
  if (distributions.length === 0) throw new RangeError("no distributions to average");
  const n = distributions[0]!.length;
  if (distributions.some((d) => d.length !== n)) throw new RangeError("distributions over different label counts");
  return normalise(Array.from({ length: n }, (_, i) => distributions.reduce((sum, d) => sum + d[i]!, 0) / distributions.length));
}

/** A yes/no answer from the probabilities of the labels [Yes, No]. */
export function noulAnswer(p: readonly number[]): NoulAnswer {
  if (p.length !== 2) throw new RangeError(`a noul reads two labels, got ${p.length}`);
  return { type: "noul", noul: clamp01(p[0]!) };
}

/**
 * A choice answer: the most probable option (the first in the criteria's key order on a tie), the
 * probability of every option, and the normalised-peak confidence.
 */
export function choiceAnswer(optionNames: readonly string[], p: readonly number[]): ChoiceAnswer {
  if (optionNames.length !== p.length || p.length < 2) throw new RangeError(`a choice needs one probability per option (at least 2), got ${p.length} for ${optionNames.length}`);
  const best = argmax(p);
  const n = p.length;
  return {
    type: "choice",
    choice: optionNames[best]!,
    // A Map keeps every option name as data, in the criteria's order ("__proto__" and "2" included).
    probabilities: new Map(optionNames.map((name, i) => [name, p[i]!])),
    confidence: clamp01((n * p[best]! - 1) / (n - 1)),
  };
}

/**
 * A score answer: the expected 0-based level, the probability of every level, the legend exactly as
 * the request gave it (structured levels included), and the dispersion-based confidence.
 */
export function scoreAnswer(legend: readonly Json[], p: readonly number[]): ScoreAnswer {
  if (legend.length !== p.length || p.length < 2) throw new RangeError(`a score needs one probability per level (at least 2), got ${p.length} for ${legend.length}`);
  const n = p.length;
  const mean = p.reduce((sum, pi, i) => sum + i * pi, 0);
  const variance = p.reduce((sum, pi, i) => sum + pi * (i - mean) ** 2, 0);
  const sigmaMax = (n - 1) / 2;
  return {
    type: "score",
    score: Math.min(Math.max(mean, 0), n - 1),
    confidence: clamp01(1 - Math.sqrt(variance) / sigmaMax),
    legend: new Map(legend.map((level, i) => [String(i), level])),
    probabilities: new Map(p.map((pi, i) => [String(i), pi])),
  };
}

/**
 * p_chunk of a choice read in chunks: one softmax over every option's label log-probability,
 * gathered from all chunk passes in key order. The runtime's values are full-vocabulary
 * log-probabilities, so values from different passes are on one scale and normalise together.
 */
export function chunkProbabilities(chunkLogprobs: readonly (readonly number[])[]): number[] {
  return probabilities(chunkLogprobs.flat());
}

/**
 * The finalists of a chunked choice: the smallest top set by p_chunk (ties: key order) holding at
 * least FINALIST_MASS of the probability, capped at OPTIONS_PER_PASS (one pass can offer no more).
 * Returned in key order, the order the final pass offers them in.
 */
export function selectFinalists(names: readonly string[], pChunk: readonly number[]): string[] {
  if (names.length !== pChunk.length) throw new RangeError(`${names.length} options but ${pChunk.length} probabilities`);
  // Array.prototype.sort is stable, so equal probabilities keep key order.
  const ranked = names.map((_, i) => i).sort((a, b) => pChunk[b]! - pChunk[a]!);
  const chosen: number[] = [];
  let mass = 0;
  for (const i of ranked) {
    if (mass >= FINALIST_MASS || chosen.length === OPTIONS_PER_PASS) break;
    chosen.push(i);
    mass += pChunk[i]!;
  }
  return chosen.sort((a, b) => a - b).map((i) => names[i]!);
}

/**
 * p_final of a chunked choice: the final pass re-reads the finalists side by side, and its
 * within-pass distribution p_joint shares out the mass the finalists held in p_chunk:
 * `p_final[i] = p_joint[i] · Σ_{j∈F} p_chunk[j]` for a finalist, `p_chunk[i]` for any other option.
 * `finalLogprobs` are the final pass's values for `finalists` in order; null when there is a single
 * finalist, which needs no final pass (p_final = p_chunk).
 */
export function mergeChunks(
  names: readonly string[],
  pChunk: readonly number[],
  finalists: readonly string[],
  finalLogprobs: readonly number[] | null,
): number[] {
  if (finalLogprobs === null) {
    if (finalists.length > 1) throw new RangeError(`${finalists.length} finalists need a final pass`);
    return normalise([...pChunk]);
  }
  if (finalLogprobs.length !== finalists.length) throw new RangeError(`${finalists.length} finalists but ${finalLogprobs.length} log-probabilities`);
  const index = new Map(names.map((name, i) => [name, i]));
  const at = finalists.map((name) => {
    const i = index.get(name);
    if (i === undefined) throw new RangeError(`finalist ${JSON.stringify(name)} is not an option`);
    return i;
  });
  const pJoint = probabilities(finalLogprobs);
  const finalistMass = at.reduce((sum, i) => sum + pChunk[i]!, 0);
  const pFinal = [...pChunk];
  at.forEach((i, k) => (pFinal[i] = pJoint[k]! * finalistMass));
  return normalise(pFinal);
}

/** Divides by the sum, so the result sums to 1 within rounding; the caller guarantees a positive sum. */
function normalise(weights: number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (!(sum > 0) || !Number.isFinite(sum)) throw new RangeError(`cannot normalise weights summing to ${sum}`);
  return weights.map((w) => clamp01(w / sum));
}

/** Index of the largest value; the first one wins a tie. */
function argmax(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

function clamp01(x: number): number {
  return Math.min(Math.max(x, 0), 1);
}

/**
 * An answer under a release's calibration (calibration.ts): Platt scaling of p(yes) for noul, a
 * temperature over the distribution for choice and score, whose choice, score and confidence are then
 * read again. A type the calibration leaves out is returned as it is.
 */
export function calibratedAnswer(answer: Answer, calibration: Calibration): Answer {
  if (answer.type === "noul") return calibration.noul ? { ...answer, noul: applyPlatt(answer.noul, calibration.noul) } : answer;
  const temperature = calibration[answer.type]?.temperature;
  if (temperature === undefined) return answer;
  const p = applyTemperature([...answer.probabilities.values()], temperature);
  const read = answer.type === "choice" ? choiceAnswer([...answer.probabilities.keys()], p) : scoreAnswer([...answer.legend.values()] as Json[], p);
  return answer.option_mass === undefined ? read : { ...read, option_mass: answer.option_mass };
}
