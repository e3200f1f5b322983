/**
 * Calibration as a specification (runs in tests only): the maps' hand-computed values, fits that
 * recover parameters known in advance from seeded synthetic data, and properties that hold for any
 * probabilities a readout can produce (zeros included).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  IDENTITY_CALIBRATION,
  TEMPERATURE_RANGE,
  applyPlatt,
  applyTemperature,
  fitPlatt,
  fitTemperature,
  plattNll,
  temperatureNll,
} from "./calibration.ts";
import { seededRandom } from "../../test/support/random.ts";


const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
const mean = (values: readonly number[]) => sum(values) / values.length;

/**
 * n items whose readout says p = σ(x), x uniform on [−4, 4], and whose true outcome is yes with
 * probability σ(slope·x + bias): the readout is calibrated exactly when slope = 1 and bias = 0.
 */
function plattData(seed: number, n: number, slope: number, bias: number): { p: number[]; yes: boolean[] } {
  const random = seededRandom(seed);
  const p: number[] = [];
  const yes: boolean[] = [];
  for (let i = 0; i < n; i++) {
    const x = -4 + 8 * random();
    p.push(sigmoid(x));
    yes.push(random() < sigmoid(slope * x + bias));
  }
  return { p, yes };
}

/** A label drawn from distribution p. */
function sample(p: readonly number[], u: number): number {
  let acc = 0;
  for (let i = 0; i < p.length; i++) {
    acc += p[i]!;
    if (u < acc) return i;
  }
  return p.length - 1;
}

/** Random true distributions over `k` labels: softmax of normal logits with standard deviation 1.5. */
function trueDistributions(random: () => number, n: number, k: number): number[][] {
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Array.from({ length: n }, () => {
    const w = Array.from({ length: k }, () => Math.exp(1.5 * normal()));
    const total = sum(w);
    return w.map((wi) => wi / total);
  });
}

describe("IDENTITY_CALIBRATION", () => {
  it("calibrates no type", () => {
    expect(IDENTITY_CALIBRATION).toEqual({ noul: null, choice: null, score: null });
  });
});

describe("applyPlatt", () => {
  it("is σ(slope·logit(p) + bias)", () => {
    // Odds 3 to 1, squared by slope 2: 9 to 1.
    expect(applyPlatt(0.75, { slope: 2, bias: 0 })).toBeCloseTo(0.9, 12);
    // Even odds, multiplied by e^bias = 3.
    expect(applyPlatt(0.5, { slope: 1, bias: Math.log(3) })).toBeCloseTo(0.75, 12);
  });

  it("is close to the identity at slope 1, bias 0", () => {
    for (const p of [1e-6, 0.1, 0.5, 0.9, 1 - 1e-6]) expect(applyPlatt(p, { slope: 1, bias: 0 })).toBeCloseTo(p, 10);
  });

  it("keeps 0 and 1 finite by clamping p to [1e-12, 1 − 1e-12]", () => {
    expect(applyPlatt(0, { slope: 1, bias: 0 })).toBeCloseTo(1e-12, 20);
    expect(applyPlatt(1, { slope: 1, bias: 0 })).toBeCloseTo(1 - 1e-12, 15);
    expect(applyPlatt(1, { slope: 0.5, bias: 0 })).toBeLessThan(1);
  });

  it("stays in [0, 1] for any probability and any finite parameters", () => {
    const p = fc.oneof(fc.double({ min: 0, max: 1, noNaN: true }), fc.constantFrom(0, 1, Number.MIN_VALUE, 1 - Number.EPSILON));
    const param = fc.double({ min: -1e6, max: 1e6, noNaN: true });
    fc.assert(
      fc.property(p, param, param, (pi, slope, bias) => {
        const q = applyPlatt(pi, { slope, bias });
        expect(q).toBeGreaterThanOrEqual(0);
        expect(q).toBeLessThanOrEqual(1);
      }),
      { seed: 1, numRuns: 500 },
    );
  });

  it("refuses a probability outside [0, 1] and non-finite parameters", () => {
    expect(() => applyPlatt(1.1, { slope: 1, bias: 0 })).toThrow(RangeError);
    expect(() => applyPlatt(Number.NaN, { slope: 1, bias: 0 })).toThrow(RangeError);
    expect(() => applyPlatt(0.5, { slope: Infinity, bias: 0 })).toThrow(RangeError);
    expect(() => applyPlatt(0.5, { slope: 1, bias: Number.NaN })).toThrow(RangeError);
  });
});

describe("applyTemperature", () => {
  it("divides the log-odds by T", () => {
    // 9 to 1 at T = 2 is 3 to 1; at T = 0.5 it is 81 to 1.
    const [a, b] = applyTemperature([0.9, 0.1], 2);
    expect(a).toBeCloseTo(0.75, 12);
    expect(b).toBeCloseTo(0.25, 12);
    expect(applyTemperature([0.9, 0.1], 0.5)[0]).toBeCloseTo(81 / 82, 12);
  });

  it("keeps a probability of 0 at 0, and spreads all zeros evenly", () => {
    expect(applyTemperature([0.6, 0, 0.4], 3)[1]).toBe(0);
    expect(applyTemperature([0, 0, 0, 0], 2)).toEqual([0.25, 0.25, 0.25, 0.25]);
  });

  it("returns any distribution unchanged at T = 1, within 1e-12", () => {
    const weights = fc.array(fc.oneof(fc.constant(0), fc.double({ min: 1e-9, max: 1, noNaN: true })), { minLength: 1, maxLength: 64 });
    fc.assert(
      fc.property(weights.filter((w) => sum(w) > 0), (w) => {
        const total = sum(w);
        const p = w.map((wi) => wi / total);
        applyTemperature(p, 1).forEach((q, i) => expect(Math.abs(q - p[i]!)).toBeLessThanOrEqual(1e-12));
      }),
      { seed: 2, numRuns: 500 },
    );
  });

  it("returns a distribution in [0, 1] summing to 1 within 1e-12, for any input including zeros", () => {
    const p = fc.oneof(fc.constant(0), fc.constant(1), fc.constant(Number.MIN_VALUE), fc.double({ min: 0, max: 1, noNaN: true }));
    const temperature = fc.oneof(fc.constant(1), fc.double({ min: 0.01, max: 100, noNaN: true }));
    fc.assert(
      fc.property(fc.array(p, { minLength: 1, maxLength: 255 }), temperature, (ps, t) => {
        const q = applyTemperature(ps, t);
        expect(q).toHaveLength(ps.length);
        for (const qi of q) {
          expect(qi).toBeGreaterThanOrEqual(0);
          expect(qi).toBeLessThanOrEqual(1);
        }
        expect(Math.abs(sum(q) - 1)).toBeLessThanOrEqual(1e-12);
        if (ps.some((pi) => pi > 0)) ps.forEach((pi, i) => pi === 0 && expect(q[i]).toBe(0));
      }),
      { seed: 3, numRuns: 500 },
    );
  });

  it("refuses no probabilities, a probability outside [0, 1], and a non-positive temperature", () => {
    expect(() => applyTemperature([], 1)).toThrow(RangeError);
    expect(() => applyTemperature([0.5, -0.5], 1)).toThrow(RangeError);
    expect(() => applyTemperature([0.5, 0.5], 0)).toThrow(RangeError);
    expect(() => applyTemperature([0.5, 0.5], Infinity)).toThrow(RangeError);
  });
});

describe("fitPlatt", () => {
  it("never turns the ranking around: scores anti-correlated with the truth give slope 0 and the base rate", () => {
    const { p, yes } = plattData(23, 4_000, -1.5, 0.4);
    const { slope, bias } = fitPlatt(p, yes);
    expect(slope).toBe(0);
    const positives = yes.filter(Boolean).length;
    const rate = (positives * ((positives + 1) / (positives + 2)) + (yes.length - positives) / (yes.length - positives + 2)) / yes.length;
    expect(bias).toBeCloseTo(Math.log(rate / (1 - rate)), 12);
    expect(applyPlatt(0.01, { slope, bias })).toBeCloseTo(applyPlatt(0.99, { slope, bias }), 12);
  });

  it("recovers a known slope and bias: y ~ Bernoulli(σ(1.7·logit(p) − 0.8)) fits to (1.7, −0.8)", () => {
    const { p, yes } = plattData(17, 20_000, 1.7, -0.8);
    const { slope, bias } = fitPlatt(p, yes);
    expect(Math.abs(slope - 1.7)).toBeLessThan(0.1);
    expect(Math.abs(bias + 0.8)).toBeLessThan(0.1);
  });

  it("leaves already calibrated probabilities nearly alone: slope ≈ 1, bias ≈ 0", () => {
    const { p, yes } = plattData(23, 20_000, 1, 0);
    const { slope, bias } = fitPlatt(p, yes);
    expect(Math.abs(slope - 1)).toBeLessThan(0.1);
    expect(Math.abs(bias)).toBeLessThan(0.1);
  });

  it("removes a constant lean towards yes: the calibrated mean matches the base rate within 0.02", () => {
    // The readout adds 1.5 to every log-odds: it says yes more often than the outcomes do.
    const { p: honest, yes } = plattData(29, 10_000, 1, 0);
    const leaning = honest.map((pi) => sigmoid(Math.log(pi / (1 - pi)) + 1.5));
    const baseRate = mean(yes.map((y) => (y ? 1 : 0)));
    expect(mean(leaning) - baseRate).toBeGreaterThan(0.1);

    const params = fitPlatt(leaning, yes);
    expect(Math.abs(mean(leaning.map((pi) => applyPlatt(pi, params))) - baseRate)).toBeLessThan(0.02);
    expect(Math.abs(params.bias + 1.5)).toBeLessThan(0.1);
  });

  it("is a minimum of the likelihood: nudging either parameter does not lower the NLL", () => {
    const { p, yes } = plattData(31, 2_000, 0.6, 0.3);
    const fitted = fitPlatt(p, yes);
    const best = plattNll(p, yes, fitted);
    for (const [da, db] of [[0.01, 0], [-0.01, 0], [0, 0.01], [0, -0.01]] as const) {
      expect(plattNll(p, yes, { slope: fitted.slope + da, bias: fitted.bias + db })).toBeGreaterThan(best - 1e-9);
    }
    expect(best).toBeLessThan(plattNll(p, yes, { slope: 1, bias: 0 }));
  });

  it("gives finite parameters on perfectly separable data, thanks to Platt's smoothed targets", () => {
    const p = [0.1, 0.2, 0.3, 0.7, 0.8, 0.9];
    const yes = [false, false, false, true, true, true];
    const params = fitPlatt(p, yes);
    expect(Number.isFinite(params.slope) && Number.isFinite(params.bias)).toBe(true);
    // The smoothed targets are 4/5 and 1/5: the fit cannot claim more certainty than about that.
    expect(applyPlatt(0.9, params)).toBeLessThan(0.95);
    expect(applyPlatt(0.1, params)).toBeGreaterThan(0.05);
    expect(applyPlatt(0.9, params)).toBeGreaterThan(applyPlatt(0.1, params));
  });

  it("returns finite parameters for any labelled data with both classes, zeros and ones included", () => {
    const p = fc.oneof(fc.constantFrom(0, 1, 0.5), fc.double({ min: 0, max: 1, noNaN: true }));
    const items = fc.array(fc.tuple(p, fc.boolean()), { minLength: 2, maxLength: 100 }).filter((xs) => xs.some(([, y]) => y) && xs.some(([, y]) => !y));
    fc.assert(
      fc.property(items, (xs) => {
        const { slope, bias } = fitPlatt(xs.map(([pi]) => pi), xs.map(([, y]) => y));
        expect(Number.isFinite(slope) && Number.isFinite(bias)).toBe(true);
      }),
      { seed: 4, numRuns: 200 },
    );
  });

  it("refuses data with one class only, and empty, mismatched or out-of-range input", () => {
    expect(() => fitPlatt([0.2, 0.9], [true, true])).toThrow(RangeError);
    expect(() => fitPlatt([0.2, 0.9], [false, false])).toThrow(RangeError);
    expect(() => fitPlatt([], [])).toThrow(RangeError);
    expect(() => fitPlatt([0.2, 0.9], [true])).toThrow(RangeError);
    expect(() => fitPlatt([0.2, 1.9], [true, false])).toThrow(RangeError);
  });
});

describe("fitTemperature", () => {
  it("finds T ≈ 2 for distributions sharpened at T = 0.5: softening by 2 undoes sharpening by 0.5", () => {
    // Observed q ∝ p^(1/0.5) = p²; softmax(log q / T) ∝ p^(2/T), which is the true p at T = 2.
    const random = seededRandom(41);
    const truthDistributions = trueDistributions(random, 20_000, 4);
    const labels = truthDistributions.map((p) => sample(p, random()));
    const sharpened = truthDistributions.map((p) => applyTemperature(p, 0.5));
    const t = fitTemperature(sharpened, labels);
    expect(Math.abs(t - 2)).toBeLessThan(0.1);
  });

  it("finds T ≈ 1 for distributions that are already calibrated", () => {
    const random = seededRandom(43);
    const truthDistributions = trueDistributions(random, 20_000, 5);
    const labels = truthDistributions.map((p) => sample(p, random()));
    expect(Math.abs(fitTemperature(truthDistributions, labels) - 1)).toBeLessThan(0.05);
  });

  it("is a minimum of the mean NLL", () => {
    const random = seededRandom(47);
    const truthDistributions = trueDistributions(random, 2_000, 3);
    const labels = truthDistributions.map((p) => sample(p, random()));
    const overconfident = truthDistributions.map((p) => applyTemperature(p, 0.7));
    const t = fitTemperature(overconfident, labels);
    const best = temperatureNll(overconfident, labels, t);
    expect(temperatureNll(overconfident, labels, t * 1.02)).toBeGreaterThan(best);
    expect(temperatureNll(overconfident, labels, t / 1.02)).toBeGreaterThan(best);
    expect(best).toBeLessThan(temperatureNll(overconfident, labels, 1));
  });

  it("stops at the edges of [0.05, 20] when the optimum lies beyond them", () => {
    // Always right with certainty: sharper is always better. Always wrong: softer is always better.
    expect(fitTemperature([[0.6, 0.4], [0.3, 0.7]], [0, 1])).toBeCloseTo(TEMPERATURE_RANGE.min, 4);
    expect(fitTemperature([[0.6, 0.4], [0.3, 0.7]], [1, 0])).toBeCloseTo(TEMPERATURE_RANGE.max, 3);
  });

  it("floors probabilities at 1e-12, so a true label read as impossible costs a finite NLL", () => {
    expect(Number.isFinite(temperatureNll([[1, 0]], [1], 1))).toBe(true);
    expect(temperatureNll([[1, 0]], [1], 1)).toBeCloseTo(-Math.log(1e-12), 6);
    const t = fitTemperature([[1, 0], [0.5, 0.5], [0.9, 0.1]], [1, 0, 0]);
    expect(t).toBeGreaterThanOrEqual(TEMPERATURE_RANGE.min);
    expect(t).toBeLessThanOrEqual(TEMPERATURE_RANGE.max);
  });

  it("returns a temperature in [0.05, 20] for any distributions and labels", () => {
    const item = fc.integer({ min: 1, max: 8 }).chain((k) =>
      fc.tuple(fc.array(fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true })), { minLength: k, maxLength: k }), fc.integer({ min: 0, max: k - 1 })),
    );
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 30 }), (items) => {
        const t = fitTemperature(items.map(([p]) => p), items.map(([, y]) => y));
        expect(t).toBeGreaterThanOrEqual(TEMPERATURE_RANGE.min);
        expect(t).toBeLessThanOrEqual(TEMPERATURE_RANGE.max);
      }),
      { seed: 5, numRuns: 200 },
    );
  });

  it("refuses empty, mismatched and out-of-range input, and a true index that is not a label", () => {
    expect(() => fitTemperature([], [])).toThrow(RangeError);
    expect(() => fitTemperature([[0.5, 0.5]], [0, 1])).toThrow(RangeError);
    expect(() => fitTemperature([[0.5, 1.5]], [0])).toThrow(RangeError);
    expect(() => fitTemperature([[0.5, 0.5]], [2])).toThrow(RangeError);
    expect(() => fitTemperature([[0.5, 0.5]], [-1])).toThrow(RangeError);
    expect(() => temperatureNll([[0.5, 0.5]], [0], 0)).toThrow(RangeError);
  });
});
