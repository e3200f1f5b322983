/**
 * A trained head (runs in the sidecar: fitted by the training worker, applied by the readout of a
 * trained release): L2-regularised multinomial logistic regression (binary logistic when there are
 * two classes) on standardised features, fitted by L-BFGS; the regularisation strength chosen by
 * k-fold cross-validation inside the training examples; then a calibration (Platt for two classes, a
 * temperature otherwise, as sidecar/decide/calibration.ts fits them for releases) fitted on the
 * out-of-fold predictions, and the head refitted on every training example. Everything it learns is
 * in `params` (server-shared/trained.ts HeadParams), plain JSON that the release stores and its
 * fingerprint covers.
 *
 *     const { params } = trainHead(X, y, classes);   // X: number[][] (n x d), y: class indices
 *     applyHead(params, x);                          // a distribution over the classes
 */
import type { FeatureBlock, HeadParams } from "../../server-shared/trained.ts";
import { applyPlatt, applyTemperature, fitPlatt, fitTemperature } from "../decide/calibration.ts";
import { headInput, type QuestionRead } from "./features.ts";

/** Regularisation strengths tried, each scored by cross-validated log loss. */
export const LAMBDAS = [1e-3, 1e-2, 1e-1, 1, 10];
const FOLDS = 3;
const MAX_ITERATIONS = 200;

export interface TrainedHead {
  params: HeadParams;
  /** Cross-validated log loss of each lambda, for the report. */
  cv: number[];
}

interface Standardiser {
  mean: Float64Array;
  scale: Float64Array;
}

function standardiser(X: readonly (readonly number[])[]): Standardiser {
  const d = X[0]!.length;
  const mean = new Float64Array(d);
  const scale = new Float64Array(d);
  for (const x of X) for (let j = 0; j < d; j++) mean[j]! += x[j]! / X.length;
  for (const x of X) for (let j = 0; j < d; j++) scale[j]! += (x[j]! - mean[j]!) ** 2 / X.length;
  for (let j = 0; j < d; j++) scale[j] = Math.sqrt(scale[j]!) || 1;
  return { mean, scale };
}

function standardised(X: readonly (readonly number[])[], s: { mean: ArrayLike<number>; scale: ArrayLike<number> }): Float64Array[] {
  return X.map((x) => {
    const z = new Float64Array(x.length + 1);
    for (let j = 0; j < x.length; j++) z[j] = (x[j]! - s.mean[j]!) / s.scale[j]!;
    z[x.length] = 1;
    return z;
  });
}

function dot(w: ArrayLike<number>, z: Float64Array): number {
  let sum = 0;
  for (let j = 0; j < z.length; j++) sum += w[j]! * z[j]!;
  return sum;
}

function softmax(logits: number[]): number[] {
  const m = Math.max(...logits);
  const e = logits.map((l) => Math.exp(l - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

function distributionOf(weights: readonly ArrayLike<number>[], z: Float64Array, classes: number): number[] {
  if (classes === 2) {
    const p = 1 / (1 + Math.exp(-dot(weights[0]!, z)));
    return [p, 1 - p];
  }
  return softmax(weights.map((w) => dot(w, z)));
}

/** Mean cross-entropy + lambda/2 |W|^2 (bias unpenalised) and its gradient; w flattened as k rows of d. */
function objective(Z: Float64Array[], y: readonly number[], classes: number, lambda: number, w: Float64Array, grad: Float64Array): number {
  const d = Z[0]!.length;
  const k = classes === 2 ? 1 : classes;
  grad.fill(0);
  let loss = 0;
  const logits = new Float64Array(k);
  const r = new Float64Array(k);
  for (let i = 0; i < Z.length; i++) {
    const z = Z[i]!;
    for (let c = 0; c < k; c++) {
      let sum = 0;
      const off = c * d;
      for (let j = 0; j < d; j++) sum += w[off + j]! * z[j]!;
      logits[c] = sum;
    }
    if (classes === 2) {
      // logit of class 0 (yes)
      const t = y[i] === 0 ? 1 : 0;
      const l = logits[0]!;
      loss += Math.max(l, 0) - l * t + Math.log1p(Math.exp(-Math.abs(l)));
      r[0] = 1 / (1 + Math.exp(-l)) - t;
    } else {
      let m = -Infinity;
      for (let c = 0; c < k; c++) m = Math.max(m, logits[c]!);
      let s = 0;
      for (let c = 0; c < k; c++) s += Math.exp(logits[c]! - m);
      loss += m + Math.log(s) - logits[y[i]!]!;
      for (let c = 0; c < k; c++) r[c] = Math.exp(logits[c]! - m) / s - (y[i] === c ? 1 : 0);
    }
    for (let c = 0; c < k; c++) {
      const rc = r[c]!;
      if (rc === 0) continue;
      const off = c * d;
      for (let j = 0; j < d; j++) grad[off + j]! += rc * z[j]!;
    }
  }
  const n = Z.length;
  let penalty = 0;
  for (let c = 0; c < k; c++) {
    const off = c * d;
    for (let j = 0; j < d; j++) {
      grad[off + j]! /= n;
      if (j < d - 1) {
        grad[off + j]! += lambda * w[off + j]!;
        penalty += w[off + j]! ** 2;
      }
    }
  }
  return loss / n + (lambda / 2) * penalty;
}

const dotv = (a: Float64Array, b: Float64Array) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
};

/** Minimises the objective by L-BFGS (memory 10) with a backtracking line search. */
function fitLinear(Z: Float64Array[], y: readonly number[], classes: number, lambda: number, start?: Float64Array[]): Float64Array[] {
  const d = Z[0]!.length;
  const k = classes === 2 ? 1 : classes;
  const w = new Float64Array(k * d);
  if (start) start.forEach((row, c) => w.set(row, c * d));
  const grad = new Float64Array(k * d);
  let f = objective(Z, y, classes, lambda, w, grad);
  const S: Float64Array[] = [];
  const Y: Float64Array[] = [];
  const newGrad = new Float64Array(k * d);
  const trial = new Float64Array(k * d);
  for (let it = 0; it < MAX_ITERATIONS; it++) {
    // two-loop recursion: direction = -H grad
    const q = grad.slice();
    const alphas: number[] = [];
    for (let m = S.length - 1; m >= 0; m--) {
      const a = dotv(S[m]!, q) / dotv(Y[m]!, S[m]!);
      alphas[m] = a;
      for (let i = 0; i < q.length; i++) q[i]! -= a * Y[m]![i]!;
    }
    const gamma = S.length > 0 ? dotv(S.at(-1)!, Y.at(-1)!) / dotv(Y.at(-1)!, Y.at(-1)!) : 1 / Math.max(1, Math.sqrt(dotv(grad, grad)));
    for (let i = 0; i < q.length; i++) q[i]! *= gamma;
    for (let m = 0; m < S.length; m++) {
      const b = dotv(Y[m]!, q) / dotv(Y[m]!, S[m]!);
      for (let i = 0; i < q.length; i++) q[i]! += S[m]![i]! * (alphas[m]! - b);
    }
    const slope = -dotv(grad, q);
    if (!(slope < 0)) break;
    let step = 1;
    let fNew = Infinity;
    for (let tries = 0; tries < 30; tries++) {
      for (let i = 0; i < w.length; i++) trial[i] = w[i]! - step * q[i]!;
      fNew = objective(Z, y, classes, lambda, trial, newGrad);
      if (fNew <= f + 1e-4 * step * slope) break;
      step /= 2;
    }
    if (!(fNew <= f)) break;
    const s = new Float64Array(w.length);
    const yv = new Float64Array(w.length);
    for (let i = 0; i < w.length; i++) {
      s[i] = trial[i]! - w[i]!;
      yv[i] = newGrad[i]! - grad[i]!;
    }
    w.set(trial);
    grad.set(newGrad);
    const improvement = f - fNew;
    f = fNew;
    if (dotv(s, yv) > 1e-12) {
      S.push(s);
      Y.push(yv);
      if (S.length > 10) {
        S.shift();
        Y.shift();
      }
    }
    if (Math.sqrt(dotv(grad, grad)) < 1e-6 || improvement < 1e-9 * Math.max(1, Math.abs(f))) break;
  }
  return Array.from({ length: k }, (_, c) => w.slice(c * d, (c + 1) * d));
}

const logLoss = (ps: number[][], y: readonly number[]) => -ps.reduce((s, p, i) => s + Math.log(Math.max(1e-12, p[y[i]!]!)), 0) / ps.length;

function fitCalibration(ps: number[][], y: readonly number[], classes: number): HeadParams["calibration"] {
  return classes === 2 ? fitPlatt(ps.map((p) => p[0]!), y.map((t) => t === 0)) : { temperature: fitTemperature(ps, [...y]) };
}

function calibrate(p: number[], calibration: HeadParams["calibration"]): number[] {
  if ("slope" in calibration) {
    const yes = applyPlatt(p[0]!, calibration);
    return [yes, 1 - yes];
  }
  return applyTemperature(p, calibration.temperature);
}

export function trainHead(X: readonly (readonly number[])[], y: readonly number[], classes: number, lambdas = LAMBDAS): TrainedHead {
  // Stratified folds, fixed by position within each class: every fold holds every class, whatever
  // the examples' order (a file that cycles through its labels would otherwise put one class in each
  // fold, and the cross-validation would score a model that never saw the class it is tested on).
  const seen = new Array<number>(classes).fill(0);
  const folds = y.map((label) => seen[label]!++ % FOLDS);
  const fold = (i: number) => folds[i]!;
  const outOfFold: number[][][] = lambdas.map(() => new Array<number[]>(X.length));
  for (let f = 0; f < FOLDS; f++) {
    const trainIdx = X.map((_, i) => i).filter((i) => fold(i) !== f);
    const testIdx = X.map((_, i) => i).filter((i) => fold(i) === f);
    const s = standardiser(trainIdx.map((i) => X[i]!));
    const Z = standardised(trainIdx.map((i) => X[i]!), s);
    const Zt = standardised(testIdx.map((i) => X[i]!), s);
    let warm: Float64Array[] | undefined;
    // Strongest first, each fit warm-started from the one before.
    for (let l = lambdas.length - 1; l >= 0; l--) {
      warm = fitLinear(Z, trainIdx.map((i) => y[i]!), classes, lambdas[l]!, warm);
      testIdx.forEach((i, t) => (outOfFold[l]![i] = distributionOf(warm!, Zt[t]!, classes)));
    }
  }
  const cv = outOfFold.map((ps) => logLoss(ps, y));
  const best = cv.indexOf(Math.min(...cv));
  const calibration = fitCalibration(outOfFold[best]!, y, classes);
  const s = standardiser(X);
  const weights = fitLinear(standardised(X, s), y, classes, lambdas[best]!);
  const params: HeadParams = {
    classes,
    lambda: lambdas[best]!,
    mean: Array.from(s.mean),
    scale: Array.from(s.scale),
    weights: weights.map((row) => Array.from(row)),
    calibration,
  };
  return { params, cv };
}

/**
 * The inputs a text head may read, tried in this order: each set's head is fitted as trainHead fits
 * one, and the set whose best cross-validated log loss is lowest is kept (ties to the earlier, the
 * cheaper). A set with a block the examples lack (no sentence embedding: the runtime has no encoder)
 * is skipped. At most six fits of trainHead per question: the cost bound of a job's choice.
 */
export const INPUT_SETS: readonly (readonly FeatureBlock[])[] = [
  ["answer_state"],
  ["pooled_state"],
  ["answer_state", "pooled_state"],
  ["answer_state", "pooled_state", "label_logprobs"],
  ["answer_state", "sentence_embedding"],
  ["answer_state", "pooled_state", "label_logprobs", "sentence_embedding"],
];

export interface ChosenHead extends TrainedHead {
  /** Each input set's best cross-validated log loss, in INPUT_SETS order, for the report. */
  byInputs: { inputs: readonly FeatureBlock[]; cvLogLoss: number }[];
}

/** A head on the input set cross-validation prefers (INPUT_SETS), its `params.inputs` naming it (a caller adds `encoder` where they name the embedding). */
export function chooseHead(reads: readonly QuestionRead[], y: readonly number[], classes: number, sets = INPUT_SETS): ChosenHead {
  let best: TrainedHead | null = null;
  let bestLoss = Infinity;
  const byInputs: ChosenHead["byInputs"] = [];
  for (const inputs of sets.filter((set) => set.every((block) => reads[0]![block].length > 0))) {
    const head = trainHead(reads.map((r) => headInput(r, inputs)), y, classes);
    const cvLogLoss = Math.min(...head.cv);
    byInputs.push({ inputs, cvLogLoss });
    if (cvLogLoss < bestLoss) {
      bestLoss = cvLogLoss;
      best = { params: { ...head.params, inputs: [...inputs] }, cv: head.cv };
    }
  }
  return { ...best!, byInputs };
}

/** The head's calibrated distribution over its classes for one feature vector. */
export function applyHead(params: HeadParams, x: readonly number[]): number[] {
  if (x.length !== params.mean.length) throw new Error(`the head takes ${params.mean.length} features, not ${x.length}`);
  return calibrate(distributionOf(params.weights, standardised([x], params)[0]!, params.classes), params.calibration);
}
