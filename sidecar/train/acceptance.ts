/**
 * The acceptance rule's statistics (runs in the sidecar's training worker, and in tests that resample
 * data): a candidate's out-of-fold answers and the base's answers to the same examples, each figure
 * with a bootstrap interval, and a decision that keeps the sampling error in view.
 *
 * - Better than the base: the paired bootstrap distribution of (candidate - base) in the primary
 *   figure (AUROC for yes/no, top-1 otherwise); accepted when its lower `confidence` quantile is at
 *   least the margin, so a candidate no better than the base is not accepted by a lucky sample.
 * - Calibrated: an ECE estimate on n items is biased upwards and noisy (10 bins on 40 items move it by
 *   about 0.1). Its noise allowance is the `confidence` quantile of the ECE a perfectly calibrated
 *   model with the candidate's own probabilities shows on n items (labels drawn from those
 *   probabilities); the candidate fails only when its ECE exceeds the bound by more than that, so a
 *   well-calibrated candidate is not rejected by noise. The ECE is also reported less the noise
 *   floor (that simulation's median), a debiased estimate.
 *
 * - At the ceiling: where the base's own figure is at least `ceiling`, it already answers about as
 *   well as can be answered and no candidate can beat it by the margin; a candidate as good (not worse
 *   by the margin, with confidence) and better calibrated (a lower ECE) is accepted there, and any
 *   other is told to use the shared model.
 *
 * Resampling is seeded (a training's id), so the same examples give the same decision after a crash.
 *
 *     const judged = judgeCandidate("noul", candidate, base, truth, { margin: 0.02, maxEce: 0.1, seed: "..." });
 *     judged.passed; judged.difference.low; judged.candidate.primary.low
 */
import type { Question } from "../../contract/decision.ts";
import { auroc, ece } from "../../server-shared/quality.ts";
import { seededRandom } from "../../server-shared/random.ts";

export interface Interval {
  estimate: number;
  low: number;
  high: number;
}

export interface JudgeOptions {
  /** The primary figure's margin over the base that the candidate must show with confidence. */
  margin: number;
  /** The bound on ECE (10 bins). */
  maxEce: number;
  /**
   * The base's primary figure at or above which it already answers about as well as can be answered,
   * so that no candidate can beat it by the margin: there a candidate as good as the base (not worse
   * by the margin, with confidence) and better calibrated is accepted too.
   */
  ceiling?: number;
  /** One-sided confidence of each test, and the two-sided coverage of the reported intervals. */
  confidence?: number;
  resamples?: number;
  seed: string;
}

export interface Judged {
  items: number;
  candidate: { primary: Interval; ece: Interval };
  base: { primary: Interval };
  /** Candidate minus base in the primary figure, paired over the same resampled items. */
  difference: Interval;
  /** The ECE a perfectly calibrated model with the candidate's probabilities shows on this many items: median and `confidence` quantile. */
  eceNoise: { median: number; quantile: number };
  /** ECE less its noise floor, at least 0. */
  debiasedEce: number;
  /** The base's ECE on the same items (the same bins). */
  baseEce: number;
  /** Whether the base's primary figure is at or above `ceiling`. */
  atCeiling: boolean;
  betterThanBase: boolean;
  calibrated: boolean;
  passed: boolean;
  reason: string | null;
}

export const DEFAULT_CONFIDENCE = 0.95;
export const DEFAULT_RESAMPLES = 1000;

const argmax = (p: readonly number[]) => p.reduce((best, v, i) => (v > p[best]! ? i : best), 0);

/** The primary figure of distributions on the items `idx` (indices may repeat). */
function primaryOf(type: Question["type"], ps: readonly (readonly number[])[], truth: readonly number[], idx: readonly number[]): number {
  if (type === "noul") return auroc(idx.map((i) => ps[i]![0]!), idx.map((i) => truth[i] === 0)) ?? 0.5;
  return idx.filter((i) => argmax(ps[i]!) === truth[i]).length / idx.length;
}

/** The reliability that ECE reads: p(yes) against the truth for yes/no, the top probability against correctness otherwise. */
function reliabilityOf(type: Question["type"], ps: readonly (readonly number[])[], truth: readonly number[]): { confidence: number[]; correct: boolean[] } {
  if (type === "noul") return { confidence: ps.map((p) => p[0]!), correct: truth.map((t) => t === 0) };
  return { confidence: ps.map((p) => Math.max(...p)), correct: ps.map((p, i) => argmax(p) === truth[i]) };
}

function quantile(sorted: readonly number[], q: number): number {
  const at = Math.min(sorted.length - 1, Math.max(0, Math.floor(q * (sorted.length - 1))));
  return sorted[at]!;
}

const sortedOf = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** Judges a candidate's out-of-fold distributions against the base's on the same items (outcome indices in `truth`). */
export function judgeCandidate(
  type: Question["type"],
  candidate: readonly (readonly number[])[],
  base: readonly (readonly number[])[],
  truth: readonly number[],
  options: JudgeOptions,
): Judged {
  const n = truth.length;
  if (candidate.length !== n || base.length !== n || n === 0) throw new Error("candidate, base and truth must cover the same items");
  const confidence = options.confidence ?? DEFAULT_CONFIDENCE;
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const random = seededRandom(options.seed);
  const all = Array.from({ length: n }, (_, i) => i);
  const reliability = reliabilityOf(type, candidate, truth);
  const eceOf = (idx: readonly number[]) => ece(idx.map((i) => reliability.confidence[i]!), idx.map((i) => reliability.correct[i]!));

  const c: number[] = [];
  const b: number[] = [];
  const d: number[] = [];
  const e: number[] = [];
  const noise: number[] = [];
  for (let r = 0; r < resamples; r++) {
    const idx = all.map(() => Math.floor(random() * n));
    const pc = primaryOf(type, candidate, truth, idx);
    const pb = primaryOf(type, base, truth, idx);
    c.push(pc);
    b.push(pb);
    d.push(pc - pb);
    e.push(eceOf(idx));
    // Outcomes drawn from the candidate's own probabilities: what a perfectly calibrated model's ECE looks like on n items.
    noise.push(ece(reliability.confidence, reliability.confidence.map((p) => random() < p)));
  }
  const tail = (1 - confidence) / 2;
  const interval = (estimate: number, xs: number[]): Interval => {
    const sorted = sortedOf(xs);
    return { estimate, low: quantile(sorted, tail), high: quantile(sorted, 1 - tail) };
  };
  const difference = interval(primaryOf(type, candidate, truth, all) - primaryOf(type, base, truth, all), d);
  const noiseSorted = sortedOf(noise);
  const eceNoise = { median: quantile(noiseSorted, 0.5), quantile: quantile(noiseSorted, confidence) };
  const observedEce = eceOf(all);
  // One-sided tests at `confidence`: the difference's lower quantile against the margin, the ECE against the bound plus its noise allowance.
  const differenceLow = quantile(sortedOf(d), 1 - confidence);
  const betterThanBase = differenceLow >= options.margin;
  const calibrated = observedEce <= options.maxEce + eceNoise.quantile;
  const basePrimary = primaryOf(type, base, truth, all);
  const baseReliability = reliabilityOf(type, base, truth);
  const baseEce = ece(baseReliability.confidence, baseReliability.correct);
  const atCeiling = options.ceiling !== undefined && basePrimary >= options.ceiling;
  const asGoodAndBetterCalibrated = atCeiling && differenceLow >= -options.margin && observedEce < baseEce;
  const metric = type === "noul" ? "AUROC" : "top-1 accuracy";
  const reason =
    !betterThanBase && !asGoodAndBetterCalibrated
      ? atCeiling
        ? `the base already answers this question about as well as it can be answered (${metric} ${basePrimary.toFixed(3)}), so no model can beat it by ${options.margin}; ` +
          `the candidate is not as good and better calibrated either (${metric} ${difference.estimate >= 0 ? "+" : ""}${difference.estimate.toFixed(3)} over it, ECE ${observedEce.toFixed(3)} against its ${baseEce.toFixed(3)}): use the shared model`
        : `cross-validated ${metric} ${difference.estimate >= 0 ? "+" : ""}${difference.estimate.toFixed(3)} over the base's (at least ${differenceLow.toFixed(3)} with ${confidence * 100} % confidence) does not beat it by ${options.margin} with that confidence`
      : !calibrated
        ? `cross-validated ECE ${observedEce.toFixed(3)} is over the bound ${options.maxEce} by more than its noise on ${n} items (${eceNoise.quantile.toFixed(3)})`
        : null;
  return {
    items: n,
    candidate: { primary: interval(primaryOf(type, candidate, truth, all), c), ece: interval(observedEce, e) },
    base: { primary: interval(primaryOf(type, base, truth, all), b) },
    difference,
    eceNoise,
    debiasedEce: Math.max(0, observedEce - eceNoise.median),
    baseEce,
    atCeiling,
    betterThanBase,
    calibrated,
    passed: (betterThanBase || asGoodAndBetterCalibrated) && calibrated,
    reason,
  };
}

/** A bootstrap interval of the primary figure alone (AUROC for yes/no, top-1 otherwise), for benchmarks' tables. */
export function primaryInterval(type: Question["type"], ps: readonly (readonly number[])[], truth: readonly number[], seed: string, confidence = DEFAULT_CONFIDENCE, resamples = DEFAULT_RESAMPLES): Interval {
  const random = seededRandom(seed);
  const all = truth.map((_, i) => i);
  const xs = sortedOf(Array.from({ length: resamples }, () => primaryOf(type, ps, truth, all.map(() => Math.floor(random() * truth.length)))));
  const tail = (1 - confidence) / 2;
  return { estimate: primaryOf(type, ps, truth, all), low: quantile(xs, tail), high: quantile(xs, 1 - tail) };
}

/**
 * Stratified k-fold assignment: examples of each outcome dealt to the folds in turn, in an order fixed
 * by `seed`, so every fold holds every outcome that has at least k examples.
 */
export function stratifiedFolds(truth: readonly number[], k: number, seed: string): number[] {
  const random = seededRandom(`folds:${seed}`);
  const order = truth.map((t, i) => ({ t, i, r: random() })).sort((a, b) => a.t - b.t || a.r - b.r);
  const folds = new Array<number>(truth.length);
  order.forEach(({ i }, rank) => (folds[i] = rank % k));
  return folds;
}

/**
 * The examples in a seeded order that deals the outcomes in turn (each outcome's examples shuffled),
 * so that every prefix is about as balanced as the whole: nested subsets for a learning curve.
 */
export function stratifiedOrder(truth: readonly number[], seed: string): number[] {
  const random = seededRandom(`order:${seed}`);
  const byOutcome = new Map<number, { i: number; r: number }[]>();
  truth.forEach((t, i) => byOutcome.set(t, [...(byOutcome.get(t) ?? []), { i, r: random() }]));
  const lists = [...byOutcome.entries()].sort(([a], [b]) => a - b).map(([, list]) => list.sort((a, b) => a.r - b.r));
  const order: number[] = [];
  for (let at = 0; order.length < truth.length; at++) for (const list of lists) if (at < list.length) order.push(list[at]!.i);
  return order;
}

/**
 * Out-of-fold predictions: for each fold, `fit` on the other folds' examples and `predict` its own;
 * every example is predicted once, by a model that never saw it (its choices made inside the other folds).
 */
export function outOfFold<M>(
  n: number,
  folds: readonly number[],
  fit: (training: number[]) => M,
  predict: (model: M, i: number) => number[],
): number[][] {
  const k = Math.max(...folds) + 1;
  const out = new Array<number[]>(n);
  for (let f = 0; f < k; f++) {
    const training = folds.flatMap((g, i) => (g === f ? [] : [i]));
    const model = fit(training);
    folds.forEach((g, i) => {
      if (g === f) out[i] = predict(model, i);
    });
  }
  return out;
}
