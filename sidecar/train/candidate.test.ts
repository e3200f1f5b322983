import { describe, expect, it } from "vitest";
import { Questions } from "../../contract/decision.ts";
import { EvaluationReport } from "../../contract/trainings.ts";
import type { ReadExample } from "../../server-shared/jobs/trainings.ts";
import { TrainedHeads } from "../../server-shared/trained.ts";
import { seededRandom } from "../../test/support/random.ts";
import { adviceFor, candidateOf, CURVE_FRACTIONS } from "./candidate.ts";
import { flattenReads } from "./features.ts";

const WIDTH = 12;
const TASK = Questions.parse({ q: { type: "noul", instructions: "Is it group A?" } });

const ENCODER = "e".repeat(64);

/**
 * Text examples as the store returns them: every block of one question's pass, a weak zero-shot
 * answer, and a truth that the pooled block carries with `signal` (the answer block is noise); or,
 * with `in: "embedding"`, that only the sentence embedding carries.
 */
function examples(n: number, signal: number, seed: number, options: { in: "pooled" | "embedding" } = { in: "pooled" }): ReadExample[] {
  const random = seededRandom(seed);
  return Array.from({ length: n }, (_, i) => {
    const truth = i % 2;
    const direction = truth === 0 ? 1 : -1;
    const carries = (block: "pooled" | "embedding", j: number) => (options.in === block && j < 3 ? direction * signal : 0) + random() - 0.5;
    const features = flattenReads([
      {
        answer_state: Array.from({ length: WIDTH }, () => random() - 0.5),
        pooled_state: Array.from({ length: WIDTH }, (_, j) => carries("pooled", j)),
        label_logprobs: [Math.log(0.5), Math.log(0.5)],
        sentence_embedding: [],
      },
    ]);
    const embedding = { encoder: ENCODER, values: Array.from({ length: 8 }, (_, j) => carries("embedding", j)) };
    const yes = 0.5 + (random() - 0.5) * 0.2;
    return { line: i + 1, customId: `e-${i}`, state: "{}", outcomes: [truth], heldOut: true, assetId: null, features, embedding, zeroShot: [[yes, 1 - yes]] };
  });
}

describe("candidateOf (k-fold over every example)", () => {
  it("accepts a head that learns what the base cannot, reading the block that carries it, with the report's confusion matrix and learning curve", () => {
    const candidate = candidateOf(TASK, "text", examples(120, 0.6, 1), { seed: "job-1", nested: true })!;
    const [evaluation] = candidate.evaluations;
    expect(evaluation).toMatchObject({ passed: true, reason: null, held_out_counts: [60, 60] });
    expect(candidate.heads.questions[0]!.inputs).toContain("pooled_state");
    expect(candidate).toMatchObject({ training: 120, heldOut: 120 });
    // Rows are the truth, columns the answer; every example counted once.
    const confusion = evaluation!.confusion!;
    expect(confusion.flat().reduce((a, b) => a + b, 0)).toBe(120);
    expect(confusion[0]![0]! + confusion[1]![1]!).toBeGreaterThan(100);
    expect(evaluation!.per_outcome![0]!.recall).toBeCloseTo(confusion[0]![0]! / 60, 12);
    // The curve: a point per fraction, the last on every example, the candidate above the base there.
    expect(candidate.curve.map((p) => p.examples)).toEqual(CURVE_FRACTIONS.map((f) => Math.round(f * 120)));
    expect(candidate.curve.at(-1)!.questions[0]!.candidate).toBeGreaterThan(candidate.curve.at(-1)!.questions[0]!.zero_shot + 0.2);
    expect(() => EvaluationReport.shape.learning_curve.parse(candidate.curve)).not.toThrow();
  });

  it("reads the sentence embedding where it carries the answer, naming its encoder; and never when the examples' embeddings are not all one encoder's", () => {
    const read = examples(120, 0.6, 8, { in: "embedding" });
    const candidate = candidateOf(TASK, "text", read, { seed: "job-8", nested: true })!;
    expect(candidate.evaluations[0]!.passed).toBe(true);
    expect(candidate.heads.questions[0]).toMatchObject({ inputs: expect.arrayContaining(["sentence_embedding"]), encoder: ENCODER });
    expect(() => TrainedHeads.parse(candidate.heads)).not.toThrow();

    for (const mixed of [read.map((e, i) => (i === 7 ? { ...e, embedding: null } : e)), read.map((e, i) => (i === 7 ? { ...e, embedding: { ...e.embedding!, encoder: "f".repeat(64) } } : e))]) {
      const without = candidateOf(TASK, "text", mixed, { seed: "job-8", nested: true })!;
      expect(without.heads.questions[0]!.inputs).not.toContain("sentence_embedding");
      expect(without.heads.questions[0]!.encoder).toBeUndefined();
      expect(without.evaluations[0]!.passed).toBe(false);
    }
  });

  it("rejects the same sentence labelled both ways: a head that memorises one twin is wrong on the other, and calibration does not turn that around", () => {
    const once = examples(40, 0.6, 2);
    const twins = once.flatMap((e, i) => [0, 1].map((truth) => ({ ...e, line: 2 * i + truth + 1, customId: `t-${i}-${truth}`, outcomes: [truth] })));
    const [evaluation] = candidateOf(TASK, "text", twins, { seed: "job-2", nested: true })!.evaluations;
    expect(evaluation).toMatchObject({ passed: false, reason: expect.stringMatching(/does not beat it by 0\.02 with that confidence/) });
    expect(evaluation!.candidate.primary).toBeLessThan(0.6);
  });

  it("is the same candidate for the same examples and seed (a fit repeated after a crash registers the same release)", () => {
    const read = examples(60, 0.6, 3);
    expect(candidateOf(TASK, "text", read, { seed: "job-3", nested: true })).toEqual(candidateOf(TASK, "text", read, { seed: "job-3", nested: true }));
  });

  it("waits for at least as many examples of each outcome as there are folds, and measures only examples whose zero-shot answer was read", () => {
    expect(candidateOf(TASK, "text", examples(9, 0.6, 4), { seed: "x", nested: false })).toBeNull();
    const read = examples(40, 0.6, 5).map((e, i) => (i < 10 ? { ...e, zeroShot: null } : e));
    const interim = candidateOf(TASK, "text", read, { seed: "x", nested: false })!;
    expect(interim).toMatchObject({ training: 40, heldOut: 30, curve: [] });
  });
});

describe("adviceFor", () => {
  const read = examples(120, 0.6, 7);
  const accepted = candidateOf(TASK, "text", read, { seed: "advice", nested: true })!;
  const evaluation = accepted.evaluations[0]!;
  const rejected = { ...evaluation, passed: false, uncertainty: { ...evaluation.uncertainty!, difference: { estimate: 0, low: -0.05, high: 0.05 } } };
  const point = (examples: number, candidate: number) => ({ examples, questions: [{ question: "q", candidate, zero_shot: 0.5 }] });

  it("has nothing to add to a plain acceptance", () => {
    expect(adviceFor(accepted.evaluations, accepted.curve)).toBeNull();
  });

  it("says more examples would help while the curve still rises, and to check the labels when it is flat", () => {
    expect(adviceFor([rejected], [point(30, 0.55), point(60, 0.6), point(90, 0.64), point(120, 0.7)])).toMatch(/still rising \(0\.640 with 90 examples, 0\.700 with 120\): more examples would likely help/);
    expect(adviceFor([rejected], [point(30, 0.6), point(60, 0.61), point(90, 0.6), point(120, 0.605)])).toMatch(/unlikely to help: check that the labels are consistent/);
  });

  it("sends the customer to the shared model at the ceiling", () => {
    const ceiling = { ...rejected, uncertainty: { ...rejected.uncertainty, at_ceiling: true } };
    expect(adviceFor([ceiling], [])).toMatch(/^Use the shared model/);
  });
});
