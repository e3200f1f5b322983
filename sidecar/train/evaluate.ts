/**
 * Acceptance of a trained candidate (runs in the sidecar's training worker): its held-out figures
 * beside the base release's zero-shot answers to the same items, per question, and the published
 * rule (contract/trainings.ts ACCEPTANCE) applied to them.
 *
 *     const evaluation = evaluateQuestion(id, question, candidate, zeroShot, truth);
 *     evaluation.passed   // primary figure >= zero-shot's + margin, and ECE <= the bound
 */
import type { Question } from "../../contract/decision.ts";
import { outcomesOf } from "../../contract/training-file.ts";
import { ACCEPTANCE, type QuestionEvaluation, type QuestionFigures } from "../../contract/trainings.ts";
import { auroc, binaryBrier, brier, eceOfBins, reliabilityBins } from "../../server-shared/quality.ts";
import { trainingOutcomes } from "../../contract/training-file.ts";
import type { EvaluationReport } from "../../contract/trainings.ts";

const FLOOR = 1e-12;
const unit = (p: number) => Math.min(1, Math.max(0, p));

/**
 * Figures of distributions over a question's outcomes against the true outcome indices. Yes/no
 * (outcome 0 is true): AUROC of p(yes), and the reliability of p(yes); otherwise top-1 accuracy and
 * the reliability of the top probability.
 */
export function figuresOf(type: Question["type"], distributions: readonly (readonly number[])[], truth: readonly number[]): { figures: QuestionFigures; bins: ReturnType<typeof reliabilityBins> } {
  const n = distributions.length;
  const argmax = (p: readonly number[]) => p.reduce((best, v, i) => (v > p[best]! ? i : best), 0);
  const logLoss = -distributions.reduce((sum, p, i) => sum + Math.log(Math.max(FLOOR, p[truth[i]!]!)), 0) / n;
  const accuracy = distributions.filter((p, i) => argmax(p) === truth[i]).length / n;
  if (type === "noul") {
    const yes = distributions.map((p) => unit(p[0]!));
    const positives = truth.map((t) => t === 0);
    const bins = reliabilityBins(yes, positives, ACCEPTANCE.eceBins);
    return {
      figures: { items: n, primary: auroc(yes, positives) ?? 0.5, primary_metric: "auroc", accuracy, log_loss: logLoss, ece: eceOfBins(bins), brier: binaryBrier(yes, positives) },
      bins,
    };
  }
  const bins = reliabilityBins(
    distributions.map((p) => unit(Math.max(...p))),
    distributions.map((p, i) => argmax(p) === truth[i]),
    ACCEPTANCE.eceBins,
  );
  return {
    figures: { items: n, primary: accuracy, primary_metric: "top1", accuracy, log_loss: logLoss, ece: eceOfBins(bins), brier: brier(distributions, truth) },
    bins,
  };
}

/** One question's evaluation and whether it met the rule. */
export function evaluateQuestion(
  id: string,
  question: Question,
  candidate: readonly (readonly number[])[],
  zeroShot: readonly (readonly number[])[],
  truth: readonly number[],
): QuestionEvaluation {
  const c = figuresOf(question.type, candidate, truth);
  const metric = c.figures.primary_metric === "auroc" ? "AUROC" : "top-1 accuracy";
  return judged(id, question.type, outcomesOf(question), c, figuresOf(question.type, zeroShot, truth), truth, ACCEPTANCE.margin, (z) => `the base's zero-shot ${z} by ${ACCEPTANCE.margin}`, metric);
}

/**
 * An image model's question (its answers, then "other"), against chance: the training part's outcome
 * frequencies `prior` given to every held-out image. Passed when its top-1 accuracy beats chance's by
 * ACCEPTANCE.imageMargin and its ECE is within ACCEPTANCE.maxEce.
 */
export function evaluateImageQuestion(id: string, question: Question, candidate: readonly (readonly number[])[], prior: readonly number[], truth: readonly number[]): QuestionEvaluation {
  const c = figuresOf("choice", candidate, truth);
  const z = figuresOf("choice", truth.map(() => prior), truth);
  return judged(id, "choice", trainingOutcomes(question, "image"), c, z, truth, ACCEPTANCE.imageMargin, (z) => `chance's ${z} by ${ACCEPTANCE.imageMargin}`, "top-1 accuracy");
}

type Figures = ReturnType<typeof figuresOf>;

/** The rule applied: the candidate's primary figure at least `margin` above the baseline's, and its ECE within the bound. */
function judged(
  id: string,
  type: Question["type"],
  outcomes: QuestionEvaluation["outcomes"],
  c: Figures,
  z: Figures,
  truth: readonly number[],
  margin: number,
  baseline: (figure: string) => string,
  metric: string,
): QuestionEvaluation {
  const reason =
    c.figures.primary < z.figures.primary + margin
      ? `held-out ${metric} ${c.figures.primary.toFixed(3)} does not beat ${baseline(z.figures.primary.toFixed(3))}`
      : c.figures.ece > ACCEPTANCE.maxEce
        ? `held-out ECE ${c.figures.ece.toFixed(3)} is over the bound ${ACCEPTANCE.maxEce}`
        : null;
  return {
    question: id,
    type,
    outcomes,
    held_out_counts: outcomes.map((_, k) => truth.filter((t) => t === k).length),
    candidate: c.figures,
    zero_shot: z.figures,
    reliability_candidate: c.bins,
    reliability_zero_shot: z.bins,
    passed: reason === null,
    reason,
  };
}

/** How well the unknown mass (outcome `other`, the last) ranks the held-out images of none of the answers above the rest. */
export function unknownDetection(candidate: readonly (readonly number[])[], truth: readonly number[], other: number): NonNullable<EvaluationReport["unknown"]> {
  const unknown = candidate.map((p) => unit(p[other]!));
  const isOther = truth.map((t) => t === other);
  const mean = (values: number[]) => (values.length === 0 ? 0 : values.reduce((sum, v) => sum + v, 0) / values.length);
  return {
    held_out_other: isOther.filter(Boolean).length,
    held_out_known: isOther.filter((o) => !o).length,
    auroc: auroc(unknown, isOther),
    mean_other: unit(mean(unknown.filter((_, i) => isOther[i]))),
    mean_known: unit(mean(unknown.filter((_, i) => !isOther[i]))),
  };
}
