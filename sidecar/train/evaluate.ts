/**
 * Acceptance of a trained candidate (runs in the sidecar's training worker): its cross-validated
 * figures beside the baseline's answers to the same items (the base release's zero-shot answers, or
 * chance for an image model), per question, and the published rule (contract/trainings.ts
 * ACCEPTANCE, judged with the sampling error by acceptance.ts) applied to them.
 *
 *     const evaluation = evaluateQuestion(id, question, outOfFold, zeroShot, truth, { baseline: "zero_shot", seed });
 *     evaluation.passed   // beats the baseline by the margin with confidence, and its ECE is within the bound and its noise
 */
import type { Question } from "../../contract/decision.ts";
import { ACCEPTANCE, type EvaluationReport, type QuestionEvaluation, type QuestionFigures } from "../../contract/trainings.ts";
import { auroc, binaryBrier, brier, eceOfBins, reliabilityBins } from "../../server-shared/quality.ts";
import { trainingOutcomes } from "../../contract/training-file.ts";
import { judgeCandidate } from "./acceptance.ts";

const FLOOR = 1e-12;
const argmaxOf = (p: readonly number[]) => p.reduce((best, v, i) => (v > p[best]! ? i : best), 0);
const unit = (p: number) => Math.min(1, Math.max(0, p));

/**
 * Figures of distributions over a question's outcomes against the true outcome indices. Yes/no
 * (outcome 0 is true): AUROC of p(yes), and the reliability of p(yes); otherwise top-1 accuracy and
 * the reliability of the top probability.
 */
export function figuresOf(type: Question["type"], distributions: readonly (readonly number[])[], truth: readonly number[]): { figures: QuestionFigures; bins: ReturnType<typeof reliabilityBins> } {
  const n = distributions.length;
  const argmax = argmaxOf;
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

/** Which rule a question is judged by: a text model against the base's zero-shot answers, an image model against chance. */
export type Baseline = "zero_shot" | "chance";

/**
 * One question's evaluation and whether it met the rule (contract/trainings.ts ACCEPTANCE): the
 * candidate's out-of-fold answers beside the baseline's answers to the same examples, judged with
 * their sampling error (acceptance.ts). `seed` fixes the resampling (the training's id and question).
 */
export function evaluateQuestion(
  id: string,
  question: Question,
  candidate: readonly (readonly number[])[],
  baseline: readonly (readonly number[])[],
  truth: readonly number[],
  options: { baseline: Baseline; seed: string },
): QuestionEvaluation {
  const image = options.baseline === "chance";
  const type = image ? "choice" : question.type;
  const c = figuresOf(type, candidate, truth);
  const z = figuresOf(type, baseline, truth);
  const margin = image ? ACCEPTANCE.imageMargin : ACCEPTANCE.margin;
  const judged = judgeCandidate(type, candidate, baseline, truth, {
    margin,
    maxEce: ACCEPTANCE.maxEce,
    confidence: ACCEPTANCE.confidence,
    resamples: ACCEPTANCE.resamples,
    // Chance is never at the ceiling: an image model must beat it.
    ...(image ? {} : { ceiling: ACCEPTANCE.ceiling }),
    seed: options.seed,
  });
  const reason = judged.reason && (image ? judged.reason.replace("the base's", "chance's").replace("beat it", "beat chance") : judged.reason);
  const outcomes = trainingOutcomes(question, image ? "image" : "text");
  const interval = (i: { low: number; high: number }) => ({ low: i.low, high: i.high });
  const confusion = outcomes.map((_, t) => outcomes.map((_, a) => candidate.filter((p, i) => truth[i] === t && argmaxOf(p) === a).length));
  const per_outcome = outcomes.map((_, k) => {
    const answered = confusion.reduce((sum, row) => sum + row[k]!, 0);
    const actual = confusion[k]!.reduce((sum, n) => sum + n, 0);
    return { precision: answered === 0 ? null : confusion[k]![k]! / answered, recall: actual === 0 ? null : confusion[k]![k]! / actual };
  });
  return {
    question: id,
    type,
    outcomes,
    held_out_counts: outcomes.map((_, k) => truth.filter((t) => t === k).length),
    candidate: c.figures,
    zero_shot: z.figures,
    reliability_candidate: c.bins,
    reliability_zero_shot: z.bins,
    uncertainty: {
      confidence: ACCEPTANCE.confidence,
      candidate_primary: interval(judged.candidate.primary),
      zero_shot_primary: interval(judged.base.primary),
      difference: { estimate: judged.difference.estimate, ...interval(judged.difference) },
      candidate_ece: interval(judged.candidate.ece),
      ece_noise: judged.eceNoise.quantile,
      debiased_ece: judged.debiasedEce,
      zero_shot_ece: judged.baseEce,
      at_ceiling: judged.atCeiling,
    },
    confusion,
    per_outcome,
    passed: judged.passed,
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
