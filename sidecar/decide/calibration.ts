/**
 * Per-release calibration of the readout (runs in the sidecar, under Bun on the GPU host; pure
 * functions, no I/O): fitting maps from a release's raw probabilities to calibrated ones on labelled
 * data, and applying them. A noul's p(yes) goes through Platt scaling; a choice's or a score's
 * distribution through one temperature.
 *
 *     const platt = fitPlatt(pYes, answeredYes);          // { slope: 1.3, bias: -0.4 }
 *     applyPlatt(0.9, platt);                             // calibrated p(yes)
 *     const t = fitTemperature(distributions, truth);     // 1.6: the raw distributions were too sharp
 *     applyTemperature([0.7, 0.2, 0.1], t);               // a softer distribution, summing to 1
 *
 * A temperature keeps the order of a distribution's labels, so the argmax does not change; Platt
 * scaling keeps the order of p(yes), so AUROC does not change, whenever its slope is positive (as it
 * is for any readout better than chance). Only the stated probabilities move.
 */

import type { Calibration } from "../../contract/calibration.ts";

export type { Calibration };

export const IDENTITY_CALIBRATION: Calibration = { noul: null, choice: null, score: null };

/** Probabilities are floored here inside logarithms, so a label read as impossible costs 27.6 nats, not ∞. */
export const PROBABILITY_FLOOR = 1e-12;

/** The range `fitTemperature` searches; a temperature outside it would mean a broken readout, not a calibration. */
export const TEMPERATURE_RANGE = { min: 0.05, max: 20 } as const;

/** σ(slope·logit(p) + bias), p clamped to [1e-12, 1 − 1e-12] first so that 0 and 1 stay finite. */
export function applyPlatt(p: number, params: { slope: number; bias: number }): number {
  checkUnit(p, "probability");
  checkPlatt(params);
  return clamp01(sigmoid(params.slope * plattFeature(p) + params.bias));
}

/**
 * softmax(log p_i / T), shifted by the maximum so that the largest term is exactly 1 and nothing
 * overflows: a probability of 0 stays 0, and all zeros give the uniform distribution. T > 1 softens,
 * T < 1 sharpens, T = 1 renormalises. (The same softmax as the readout's `probabilities`, written
 * out here because the readout imports this module.)
 */
export function applyTemperature(p: readonly number[], temperature: number): number[] {
  if (p.length === 0) throw new RangeError("no probabilities to scale");
  for (const pi of p) checkUnit(pi, "probability");
  checkTemperature(temperature);
  const logs = p.map(Math.log);
  const max = Math.max(...logs);
  if (max === -Infinity) return p.map(() => 1 / p.length);
  // (log p_i − max) / T ≤ 0, so every term is in [0, 1] and the maximum's term is 1: the sum is ≥ 1.
  const weights = logs.map((l) => Math.exp((l - max) / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => clamp01(w / total));
}

/**
 * Platt scaling by maximum likelihood: the (slope, bias) minimising the negative log-likelihood of
 * σ(slope·x + bias), x = logit(p), found by Newton's method on the 2×2 system (IRLS) with a 1e-6
 * ridge and step halving, from Platt's start (slope 0, bias the log prior odds), at most 100 steps.
 *
 * The targets are Platt's smoothed labels, (N+ + 1)/(N+ + 2) for a positive and 1/(N− + 2) for a
 * negative, not 1 and 0: on data that p separates perfectly the unsmoothed likelihood has no
 * maximum (the slope would grow without bound), and the smoothing is the posterior mean of a
 * uniform prior on each class's frequency, which vanishes as the classes grow.
 *
 * The slope is at least 0. A negative one would turn the scores' ranking around, which is no
 * calibration but another model fitted on the calibration data: out-of-fold scores of a head that
 * memorised its training examples can be anti-correlated with the truth (the same text labelled both
 * ways in two folds), and inverting them would score the head far above what it knows. Held at 0,
 * the answer is the base rate.
 */
export function fitPlatt(p: readonly number[], positives: readonly boolean[]): { slope: number; bias: number } {
  checkPaired(p, positives);
  for (const pi of p) checkUnit(pi, "probability");
  const nPos = positives.reduce((n, y) => n + (y ? 1 : 0), 0);
  const nNeg = positives.length - nPos;
  if (nPos === 0 || nNeg === 0) throw new RangeError(`Platt scaling needs both classes, got ${nPos} positive and ${nNeg} negative`);

  const x = p.map(plattFeature);
  const yPos = (nPos + 1) / (nPos + 2);
  const yNeg = 1 / (nNeg + 2);
  const targets = positives.map((y) => (y ? yPos : yNeg));

  let slope = 0;
  let bias = Math.log((nPos + 1) / (nNeg + 1));
  let nll = summedPlattNll(x, targets, slope, bias);
  for (let iteration = 0; iteration < 100; iteration++) {
    // Gradient and Hessian of the NLL in (slope, bias): Σ (σ − t)·(x, 1) and Σ σ(1 − σ)·(x, 1)(x, 1)ᵀ.
    let gA = 0, gB = 0, hAA = RIDGE, hAB = 0, hBB = RIDGE;
    for (let i = 0; i < x.length; i++) {
      const xi = x[i]!;
      const s = sigmoid(slope * xi + bias);
      const w = s * (1 - s);
      const r = s - targets[i]!;
      gA += r * xi;
      gB += r;
      hAA += w * xi * xi;
      hAB += w * xi;
      hBB += w;
    }
    const det = hAA * hBB - hAB * hAB;
    const dA = -(hBB * gA - hAB * gB) / det;
    const dB = -(hAA * gB - hAB * gA) / det;
    if (!Number.isFinite(dA) || !Number.isFinite(dB)) break;

    let step = 1;
    let accepted = false;
    while (step >= MIN_STEP) {
      const nextSlope = slope + step * dA;
      const nextBias = bias + step * dB;
      const nextNll = summedPlattNll(x, targets, nextSlope, nextBias);
      if (nextNll < nll) {
        slope = nextSlope;
        bias = nextBias;
        nll = nextNll;
        accepted = true;
        break;
      }
      step /= 2;
    }
    // No step lowers the NLL: the minimum is reached to rounding.
    if (!accepted || Math.max(Math.abs(step * dA), Math.abs(step * dB)) < NEWTON_TOLERANCE) break;
  }
  if (slope < 0) {
    // The NLL is convex, so with the slope held at 0 its minimum is the smoothed base rate's log-odds.
    const rate = (nPos * yPos + nNeg * yNeg) / positives.length;
    return { slope: 0, bias: Math.log(rate / (1 - rate)) };
  }
  return { slope, bias };
}

/**
 * The temperature in [0.05, 20] minimising the mean NLL of softmax(log p / T) at the true index
 * (`temperatureNll`), by golden-section search on log T to 1e-6. The NLL is convex in 1/T (a
 * log-sum-exp of functions linear in 1/T, less a linear term), hence unimodal in log T, which is
 * what golden-section search needs.
 */
export function fitTemperature(distributions: readonly (readonly number[])[], truth: readonly number[]): number {
  const logs = flooredLogs(distributions, truth);
  const nllAt = (logT: number) => meanLogSoftmaxNll(logs, truth, Math.exp(logT));
  let lo = Math.log(TEMPERATURE_RANGE.min);
  let hi = Math.log(TEMPERATURE_RANGE.max);
  let c = hi - INVERSE_PHI * (hi - lo);
  let d = lo + INVERSE_PHI * (hi - lo);
  let fc = nllAt(c);
  let fd = nllAt(d);
  while (hi - lo > LOG_T_TOLERANCE) {
    if (fc <= fd) {
      hi = d;
      d = c;
      fd = fc;
      c = hi - INVERSE_PHI * (hi - lo);
      fc = nllAt(c);
    } else {
      lo = c;
      c = d;
      fc = fd;
      d = lo + INVERSE_PHI * (hi - lo);
      fd = nllAt(d);
    }
  }
  return Math.exp((lo + hi) / 2);
}

/** Mean NLL at the true index of softmax(log max(p, 1e-12) / T): the figure `fitTemperature` minimises. */
export function temperatureNll(distributions: readonly (readonly number[])[], truth: readonly number[], temperature: number): number {
  checkTemperature(temperature);
  return meanLogSoftmaxNll(flooredLogs(distributions, truth), truth, temperature);
}

/** Mean NLL of σ(slope·logit(p) + bias) against 0/1 labels: the figure `fitPlatt` minimises, unsmoothed. */
export function plattNll(p: readonly number[], positives: readonly boolean[], params: { slope: number; bias: number }): number {
  checkPaired(p, positives);
  for (const pi of p) checkUnit(pi, "probability");
  checkPlatt(params);
  return summedPlattNll(p.map(plattFeature), positives.map((y) => (y ? 1 : 0)), params.slope, params.bias) / p.length;
}

const RIDGE = 1e-6;
const MIN_STEP = 2 ** -30;
const NEWTON_TOLERANCE = 1e-10;
const LOG_T_TOLERANCE = 1e-6;
const INVERSE_PHI = (Math.sqrt(5) - 1) / 2;

/** logit(p) with p clamped to [1e-12, 1 − 1e-12] (so |x| ≤ 27.7), and then to [−30, 30]. */
function plattFeature(p: number): number {
  const q = Math.min(Math.max(p, PROBABILITY_FLOOR), 1 - PROBABILITY_FLOOR);
  return Math.min(Math.max(Math.log(q / (1 - q)), -30), 30);
}

/** Σ t·softplus(−z) + (1 − t)·softplus(z), z = a·x + b: the cross-entropy, with no log of 0. */
function summedPlattNll(x: readonly number[], targets: readonly number[], a: number, b: number): number {
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    const z = a * x[i]! + b;
    const t = targets[i]!;
    sum += t * softplus(-z) + (1 - t) * softplus(z);
  }
  return sum;
}

function flooredLogs(distributions: readonly (readonly number[])[], truth: readonly number[]): number[][] {
  checkPaired(distributions, truth);
  return distributions.map((p, item) => {
    for (const pi of p) checkUnit(pi, "probability");
    const t = truth[item]!;
    if (!Number.isInteger(t) || t < 0 || t >= p.length) throw new RangeError(`true index ${t} is not one of the ${p.length} labels of item ${item}`);
    return p.map((pi) => Math.log(Math.max(pi, PROBABILITY_FLOOR)));
  });
}

/** Mean of logsumexp(z) − z_truth with z = logs / T, shifted by the maximum. */
function meanLogSoftmaxNll(logs: readonly (readonly number[])[], truth: readonly number[], temperature: number): number {
  let sum = 0;
  logs.forEach((row, item) => {
    const max = Math.max(...row);
    let total = 0;
    for (const l of row) total += Math.exp((l - max) / temperature);
    sum += Math.log(total) - (row[truth[item]!]! - max) / temperature;
  });
  return sum / logs.length;
}

function sigmoid(z: number): number {
  if (z >= 0) return 1 / (1 + Math.exp(-z));
  const e = Math.exp(z);
  return e / (1 + e);
}

function softplus(z: number): number {
  return Math.max(z, 0) + Math.log1p(Math.exp(-Math.abs(z)));
}

function clamp01(x: number): number {
  return Math.min(Math.max(x, 0), 1);
}

function checkPaired(a: readonly unknown[], b: readonly unknown[]): void {
  if (a.length === 0) throw new RangeError("no items to fit");
  if (a.length !== b.length) throw new RangeError(`${a.length} items but ${b.length} labels`);
}

function checkUnit(p: number, what: string): void {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`${what} must be in [0, 1], got ${p}`);
}

function checkPlatt(params: { slope: number; bias: number }): void {
  if (!Number.isFinite(params.slope) || !Number.isFinite(params.bias)) throw new RangeError(`Platt parameters must be finite, got ${params.slope}, ${params.bias}`);
}

function checkTemperature(temperature: number): void {
  if (!(temperature > 0) || !Number.isFinite(temperature)) throw new RangeError(`temperature must be a positive finite number, got ${temperature}`);
}
