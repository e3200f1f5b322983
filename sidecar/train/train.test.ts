import { describe, expect, it } from "vitest";
import { trainedFingerprint, trainedModelId, TrainedHeads } from "../../server-shared/trained.ts";
import { seededRandom } from "../../test/support/random.ts";
import { figuresOf, evaluateQuestion } from "./evaluate.ts";
import { applyHead, trainHead } from "./head.ts";

/** Points around `classes` centres in `d` dimensions, with noise; the class is the centre's index. */
function blobs(n: number, classes: number, d: number, seed: number): { X: number[][]; y: number[] } {
  const random = seededRandom(seed);
  const centres = Array.from({ length: classes }, () => Array.from({ length: d }, () => random() * 4 - 2));
  const X: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const k = i % classes;
    X.push(centres[k]!.map((c) => c + (random() - 0.5)));
    y.push(k);
  }
  return { X, y };
}

describe("trainHead and applyHead", () => {
  it("learn separable classes, and the saved parameters give the same answers after a JSON round trip", () => {
    for (const classes of [2, 4]) {
      const train = blobs(120, classes, 16, 1 + classes);
      const test = blobs(60, classes, 16, 1 + classes);
      const { params, cv } = trainHead(train.X, train.y, classes);
      expect(cv).toHaveLength(5);
      const saved = TrainedHeads.parse(JSON.parse(JSON.stringify({ kind: "hidden_state_head", features: 16, questions: [params] }))).questions[0]!;
      let correct = 0;
      test.X.forEach((x, i) => {
        const p = applyHead(params, x);
        expect(applyHead(saved, x)).toEqual(p);
        expect(p.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 9);
        if (p.indexOf(Math.max(...p)) === test.y[i]) correct++;
      });
      expect(correct / test.X.length).toBeGreaterThan(0.95);
    }
  });

  it("refuses a feature vector of another width", () => {
    const { X, y } = blobs(40, 2, 8, 3);
    const { params } = trainHead(X, y, 2);
    expect(() => applyHead(params, [1, 2, 3])).toThrow(/takes 8 features, not 3/);
  });
});

describe("evaluateQuestion", () => {
  // 40 examples of each outcome: enough for the bootstrap to tell a clear difference from none.
  const truth = Array.from({ length: 80 }, (_, i) => i % 2);
  const sharp = truth.map((t) => (t === 0 ? [0.97, 0.03] : [0.03, 0.97]));
  const chance = truth.map(() => [0.5, 0.5]);
  const question = { type: "noul" as const };
  const zeroShot = { baseline: "zero_shot" as const, seed: "t" };

  it("accepts a candidate that beats the zero-shot answers by the margin with confidence and is calibrated, with its intervals", () => {
    const evaluation = evaluateQuestion("q", question, sharp, chance, truth, zeroShot);
    expect(evaluation).toMatchObject({ passed: true, reason: null, held_out_counts: [40, 40], outcomes: [true, false] });
    expect(evaluation.candidate).toMatchObject({ primary_metric: "auroc", primary: 1, accuracy: 1 });
    expect(evaluation.zero_shot.primary).toBe(0.5);
    expect(evaluation.uncertainty).toMatchObject({ confidence: 0.95, difference: { estimate: 0.5, low: 0.5, high: 0.5 } });
  });

  it("rejects a candidate no better than the zero-shot answers, and a badly calibrated one", () => {
    // Wrong on every fourth example (AUROC 0.75): the same answers are no better.
    const middling = truth.map((t, i) => ((i % 4 === 0) !== (t === 0) ? [0.6, 0.4] : [0.4, 0.6]));
    expect(evaluateQuestion("q", question, middling, middling, truth, zeroShot)).toMatchObject({ passed: false, reason: expect.stringMatching(/AUROC \+0\.000 over the base's .* does not beat it by 0\.02/) });
    // A base that answers every example right: the shared model is the one to use.
    expect(evaluateQuestion("q", question, sharp, sharp, truth, zeroShot)).toMatchObject({ passed: false, reason: expect.stringMatching(/use the shared model$/) });
    const timid = truth.map((t) => (t === 0 ? [0.6, 0.4] : [0.4, 0.6]));
    expect(evaluateQuestion("q", question, timid, chance, truth, zeroShot)).toMatchObject({ passed: false, reason: expect.stringMatching(/ECE 0\.400 is over the bound 0\.1 by more than its noise on 80 items/) });
  });

  it("judges an image model against chance, by its top-1 accuracy, with the image margin", () => {
    const image = { type: "choice" as const, criteria: new Map([["circle", null], ["square", null]]) } as unknown as Parameters<typeof evaluateQuestion>[1];
    const labels = Array.from({ length: 90 }, (_, i) => i % 3);
    const right = labels.map((t) => [0, 1, 2].map((k) => (k === t ? 0.9 : 0.05)));
    const prior = labels.map(() => [1 / 3, 1 / 3, 1 / 3]);
    const evaluation = evaluateQuestion("q", image, right, prior, labels, { baseline: "chance", seed: "i" });
    expect(evaluation).toMatchObject({ type: "choice", outcomes: ["circle", "square", null], passed: true, held_out_counts: [30, 30, 30] });
    expect(evaluateQuestion("q", image, prior, prior, labels, { baseline: "chance", seed: "i" }).reason).toMatch(/over chance's .* does not beat chance by 0\.1/);
  });

  it("measures a choice by its top-1 accuracy and log loss", () => {
    const { figures } = figuresOf("choice", [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1]], [0, 1, 2]);
    expect(figures).toMatchObject({ primary_metric: "top1", items: 3 });
    expect(figures.primary).toBeCloseTo(2 / 3, 12);
    expect(figures.log_loss).toBeCloseTo(-(Math.log(0.7) + Math.log(0.8) + Math.log(0.1)) / 3, 12);
  });
});

describe("a trained release's identity", () => {
  const task = { questions: '{"q":{"type":"noul"}}' };
  const heads = TrainedHeads.parse({ kind: "hidden_state_head", features: 2, questions: [{ classes: 2, lambda: 1, mean: [0, 1], scale: [1, 2], weights: [[0.5, -0.25, 0.1]], calibration: { slope: 1.2, bias: -0.1 } }] });

  it("fingerprints the base, the task and the heads, whatever order a store gives the heads' keys back in", async () => {
    const fingerprint = await trainedFingerprint("a".repeat(64), task, heads);
    expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
    const reordered = JSON.parse(JSON.stringify(heads, Object.keys(heads).sort().concat(["classes", "lambda", "mean", "scale", "weights", "calibration", "slope", "bias"])));
    expect(await trainedFingerprint("a".repeat(64), task, reordered)).toBe(fingerprint);
    expect(await trainedFingerprint("b".repeat(64), task, heads)).not.toBe(fingerprint);
    expect(await trainedFingerprint("a".repeat(64), { questions: '{"q":{"type":"noul","instructions":null}}' }, heads)).not.toBe(fingerprint);
    const nudged = { ...heads, questions: [{ ...heads.questions[0]!, weights: [[0.5, -0.25, 0.1000001]] }] };
    expect(await trainedFingerprint("a".repeat(64), task, nudged)).not.toBe(fingerprint);
  });

  it("names a trained model within the registry's id pattern", () => {
    const id = trainedModelId("svc-shared", "3f2a9c01-b7de-4c1a-9e2f-0123456789ab");
    expect(id).toBe("ft:svc-shared:3f2a9c01b7de4c1a9e2f0123456789ab");
    expect(trainedModelId("a/b c".repeat(40), "3f2a9c01-b7de-4c1a-9e2f-0123456789ab")).toMatch(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/);
  });
});
