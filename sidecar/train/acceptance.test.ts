import { describe, expect, it } from "vitest";
import { ACCEPTANCE } from "../../contract/trainings.ts";
import { seededRandom } from "../../test/support/random.ts";
import { judgeCandidate, outOfFold, stratifiedFolds, stratifiedOrder } from "./acceptance.ts";
import { applyHead, trainHead } from "./head.ts";

/** A standard normal draw (Box-Muller). */
const normal = (random: () => number) => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());

const softmax = (logits: number[]) => {
  const m = Math.max(...logits);
  const e = logits.map((l) => Math.exp(l - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

/**
 * A task of `classes` outcomes whose examples are points around fixed centres (unit noise in `d`
 * dimensions), drawn afresh by each seed from the same population: a resample of the same data.
 * `bayes` is the best answer there is, the true posterior of each example's class.
 */
function population(classes: number, d: number, spread: number) {
  const fixed = seededRandom(1234);
  const centres = Array.from({ length: classes }, () => Array.from({ length: d }, () => normal(fixed) * spread));
  return (n: number, seed: number) => {
    const random = seededRandom(seed);
    const X: number[][] = [];
    const y: number[] = [];
    for (let i = 0; i < n; i++) {
      const k = Math.floor(random() * classes);
      X.push(centres[k]!.map((c) => c + normal(random)));
      y.push(k);
    }
    const bayes = X.map((x) => softmax(centres.map((c) => -c.reduce((s, v, j) => s + (v - x[j]!) ** 2, 0) / 2)));
    return { X, y, bayes, random };
  };
}

/** Out-of-fold answers of a head trained as the worker trains one (5 folds, each fit choosing its own lambda inside its folds). */
function crossValidated(X: number[][], y: number[], classes: number, seed: string): number[][] {
  const folds = stratifiedFolds(y, 5, seed);
  return outOfFold(
    X.length,
    folds,
    (training) => trainHead(training.map((i) => X[i]!), training.map((i) => y[i]!), classes).params,
    (params, i) => applyHead(params, X[i]!),
  );
}

/** A weak base: its most likely answer is right with probability `accuracy`, and it says so (calibrated). */
function weakBase(y: number[], classes: number, accuracy: number, random: () => number): number[][] {
  return y.map((truth) => {
    const top = random() < accuracy ? truth : (truth + 1 + Math.floor(random() * (classes - 1))) % classes;
    return Array.from({ length: classes }, (_, k) => (k === top ? accuracy : (1 - accuracy) / (classes - 1)));
  });
}

const rule = (seed: string) => ({ margin: ACCEPTANCE.margin, maxEce: ACCEPTANCE.maxEce, seed });

describe("the acceptance rule, on 20 resamples of the same data", () => {
  it("accepts a choice model clearly better than the base every time (189 examples, about 0.8 top-1 against 0.475)", () => {
    const draw = population(5, 16, 0.62);
    const decisions = Array.from({ length: 20 }, (_, r) => {
      const { X, y, random } = draw(189, 100 + r);
      const candidate = crossValidated(X, y, 5, `choice-${r}`);
      const judged = judgeCandidate("choice", candidate, weakBase(y, 5, 0.475, random), y, rule(`choice-${r}`));
      expect(judged.candidate.primary.estimate).toBeGreaterThan(0.65);
      expect(judged.base.primary.estimate).toBeLessThan(0.6);
      return judged;
    });
    expect(decisions.map((d) => d.reason)).toEqual(decisions.map(() => null));
  });

  it("rejects a choice model no better than the base every time (the base already gives the true posterior)", () => {
    const draw = population(5, 16, 0.62);
    const decisions = Array.from({ length: 20 }, (_, r) => {
      const { X, y, bayes } = draw(189, 200 + r);
      return judgeCandidate("choice", crossValidated(X, y, 5, `same-${r}`), bayes, y, rule(`same-${r}`));
    });
    expect(decisions.filter((d) => d.passed)).toEqual([]);
    for (const d of decisions) expect(d.reason).toMatch(/does not beat it by 0\.02 with that confidence/);
  });

  it("accepts a yes/no model clearly better than the base every time, and rejects one no better every time (300 examples)", () => {
    const draw = population(2, 16, 0.3);
    for (let r = 0; r < 20; r++) {
      const { X, y, bayes, random } = draw(300, 300 + r);
      const candidate = crossValidated(X, y, 2, `noul-${r}`);
      // A weak base: the true posterior blurred by noise on its log-odds.
      const blurred = bayes.map(([p]) => {
        const logit = Math.log(p! / (1 - p!)) * 0.2 + normal(random) * 1.5;
        const q = 1 / (1 + Math.exp(-logit));
        return [q, 1 - q];
      });
      const better = judgeCandidate("noul", candidate, blurred, y, rule(`noul-${r}`));
      expect(better.base.primary.estimate).toBeLessThan(better.candidate.primary.estimate - 0.1);
      expect(better).toMatchObject({ passed: true, reason: null });
      expect(judgeCandidate("noul", candidate, bayes, y, rule(`noul-${r}`))).toMatchObject({ passed: false, betterThanBase: false });
    }
  });

  it("does not reject a calibrated model for the noise of an ECE on 40 items, and rejects an overconfident one on 300", () => {
    for (let r = 0; r < 20; r++) {
      const random = seededRandom(400 + r);
      // Calibrated: outcomes drawn from the model's own probabilities.
      const small = Array.from({ length: 40 }, () => {
        const p = 0.55 + random() * 0.4;
        const top = Math.floor(random() * 5);
        const truth = random() < p ? top : (top + 1 + Math.floor(random() * 4)) % 5;
        return { p: Array.from({ length: 5 }, (_, k) => (k === top ? p : (1 - p) / 4)), truth };
      });
      const chance = small.map(() => [0.2, 0.2, 0.2, 0.2, 0.2]);
      const calm = judgeCandidate("choice", small.map((x) => x.p), chance, small.map((x) => x.truth), rule(`ece-${r}`));
      expect(calm.calibrated).toBe(true);
      // Overconfident: says 0.99 where it is right about 80 % of the time.
      const large = Array.from({ length: 300 }, () => {
        const top = Math.floor(random() * 5);
        const truth = random() < 0.8 ? top : (top + 1 + Math.floor(random() * 4)) % 5;
        return { p: Array.from({ length: 5 }, (_, k) => (k === top ? 0.99 : 0.0025)), truth };
      });
      const sure = judgeCandidate("choice", large.map((x) => x.p), large.map(() => [0.2, 0.2, 0.2, 0.2, 0.2]), large.map((x) => x.truth), rule(`ece-${r}`));
      expect(sure).toMatchObject({ betterThanBase: true, calibrated: false, passed: false, reason: expect.stringMatching(/ECE 0\.[12]\d\d is over the bound 0\.1 by more than its noise on 300 items/) });
    }
  });
});

describe("judgeCandidate", () => {
  it("gives the same decision and intervals for the same seed, and intervals that hold their estimate", () => {
    const draw = population(3, 8, 0.8);
    const { X, y, random } = draw(120, 7);
    const candidate = crossValidated(X, y, 3, "same-seed");
    const base = weakBase(y, 3, 0.5, random);
    const a = judgeCandidate("choice", candidate, base, y, rule("seed"));
    expect(judgeCandidate("choice", candidate, base, y, rule("seed"))).toEqual(a);
    for (const interval of [a.candidate.primary, a.candidate.ece, a.base.primary, a.difference]) {
      expect(interval.low).toBeLessThanOrEqual(interval.high);
    }
    expect(a.candidate.primary.low).toBeLessThanOrEqual(a.candidate.primary.estimate + 1e-9);
    expect(a.candidate.primary.high).toBeGreaterThanOrEqual(a.candidate.primary.estimate - 1e-9);
    expect(a.eceNoise.median).toBeLessThanOrEqual(a.eceNoise.quantile);
  });

  it("refuses answers that do not cover the same items", () => {
    expect(() => judgeCandidate("noul", [[0.5, 0.5]], [], [0], rule("x"))).toThrow(/same items/);
  });
});

describe("stratifiedFolds and outOfFold", () => {
  it("put every outcome in every fold and predict each example once, by a model that never saw it", () => {
    const y = Array.from({ length: 53 }, (_, i) => (i * 7) % 3);
    const folds = stratifiedFolds(y, 5, "s");
    for (let f = 0; f < 5; f++) expect(new Set(y.filter((_, i) => folds[i] === f))).toEqual(new Set([0, 1, 2]));
    const seen: number[][] = [];
    const out = outOfFold(
      y.length,
      folds,
      (training) => (seen.push(training), new Set(training)),
      (model, i) => [model.has(i) ? 1 : 0],
    );
    expect(out.every((p) => p[0] === 0)).toBe(true);
    expect(seen).toHaveLength(5);
    expect(seen.reduce((s, t) => s + t.length, 0)).toBe(4 * y.length);
  });
});

describe("stratifiedOrder", () => {
  it("deals the outcomes in turn, each prefix about as balanced as the whole, the same for the same seed", () => {
    const truth = Array.from({ length: 90 }, (_, i) => (i < 60 ? 0 : i < 80 ? 1 : 2));
    const order = stratifiedOrder(truth, "s");
    expect([...order].sort((a, b) => a - b)).toEqual(truth.map((_, i) => i));
    expect(order.slice(0, 3).map((i) => truth[i])).toEqual([0, 1, 2]);
    const prefix = order.slice(0, 30).map((i) => truth[i]!);
    for (const k of [0, 1, 2]) expect(prefix.filter((t) => t === k).length).toBe(10);
    expect(stratifiedOrder(truth, "s")).toEqual(order);
    expect(stratifiedOrder(truth, "t")).not.toEqual(order);
  });
});

describe("at the ceiling (the base already answers about as well as can be answered)", () => {
  const truth = Array.from({ length: 120 }, (_, i) => i % 2);
  // The base ranks every example right but says 0.9 where it is always right: ECE 0.1.
  const base = truth.map((t) => (t === 0 ? [0.9, 0.1] : [0.1, 0.9]));
  const options = { margin: ACCEPTANCE.margin, maxEce: ACCEPTANCE.maxEce, ceiling: ACCEPTANCE.ceiling, seed: "ceiling" };

  it("accepts a candidate as good and better calibrated, though it cannot beat the base by the margin", () => {
    const sure = truth.map((t) => (t === 0 ? [0.99, 0.01] : [0.01, 0.99]));
    const judged = judgeCandidate("noul", sure, base, truth, options);
    expect(judged).toMatchObject({ atCeiling: true, betterThanBase: false, passed: true, reason: null });
    expect(judged.candidate.ece.estimate).toBeLessThan(judged.baseEce);
  });

  it("tells a candidate that is not better calibrated to use the shared model", () => {
    const judged = judgeCandidate("noul", base, base, truth, options);
    expect(judged).toMatchObject({ atCeiling: true, passed: false });
    expect(judged.reason).toMatch(/^the base already answers this question about as well as it can be answered \(AUROC 1\.000\), so no model can beat it by 0\.02; .*: use the shared model$/);
  });

  it("does not apply below the ceiling", () => {
    // Wrong on every fourth example: AUROC 0.75.
    const weaker = truth.map((t, i) => ((i % 4 === 0) !== (t === 0) ? [0.6, 0.4] : [0.4, 0.6]));
    const sure = truth.map((t) => (t === 0 ? [0.99, 0.01] : [0.01, 0.99]));
    expect(judgeCandidate("noul", sure, weaker, truth, options)).toMatchObject({ atCeiling: false, betterThanBase: true, passed: true });
    expect(judgeCandidate("noul", weaker, weaker, truth, options)).toMatchObject({ atCeiling: false, passed: false, reason: expect.stringMatching(/does not beat it by 0\.02/) });
  });
});
