/**
 * A training's candidate and its evaluation from the examples read (runs in the sidecar's training
 * worker): k-fold cross-validation over every example (contract/trainings.ts ACCEPTANCE), then the
 * served heads fitted on all of them.
 *
 * - Each fold's examples are answered by heads fitted on the other folds. With `nested` (the final
 *   evaluation), each of those fits chooses its own inputs and regularisation inside its folds
 *   (head.ts chooseHead), so the figures are not flattered by choices made on the examples they
 *   score; without it (the interim figures while examples are read), the inputs chosen on every
 *   example read are fixed and only the regularisation is chosen inside the folds, at a quarter of
 *   the cost.
 * - A text question is judged against the base's served zero-shot answers to the same examples; an
 *   image model (its answers and "other") against chance, each fold's training outcome frequencies.
 *
 *     const candidate = candidateOf(task, "text", await store.readExamples(id), { seed: id, nested: true });
 *     candidate?.heads;          // what is registered when every question passed
 *     candidate?.evaluations;    // the report's questions
 */
import type { Questions as QuestionsSchema } from "../../contract/decision.ts";
import { trainingOutcomes } from "../../contract/training-file.ts";
import { ACCEPTANCE, type EvaluationReport, type QuestionEvaluation } from "../../contract/trainings.ts";
import type { ReadExample } from "../../server-shared/jobs/trainings.ts";
import type { HeadParams, TrainedHeads } from "../../server-shared/trained.ts";
import { outOfFold, stratifiedFolds, stratifiedOrder } from "./acceptance.ts";
import { evaluateQuestion, figuresOf, unknownDetection } from "./evaluate.ts";
import { headInput, splitReads, type QuestionRead } from "./features.ts";
import { applyHead, chooseHead, trainHead } from "./head.ts";
import { auditLabels, type LabelSuspect } from "./label-audit.ts";

type Questions = ReturnType<typeof QuestionsSchema.parse>;
type Question = Questions extends Map<string, infer Q> ? Q : never;

export interface Candidate {
  heads: TrainedHeads;
  evaluations: QuestionEvaluation[];
  /** The report's learning curve (CURVE_FRACTIONS of the examples); empty for interim figures. */
  curve: NonNullable<EvaluationReport["learning_curve"]>;
  /** An image model's unknown detection on its out-of-fold answers; null for text. */
  unknown: EvaluationReport["unknown"] | null;
  /** Examples the served heads were fitted on (every one read). */
  training: number;
  /** Examples the figures are measured on: each held out once, answered by heads that never saw it. */
  heldOut: number;
  /** Each question's label audit over every example's out-of-fold answer (label-audit.ts); empty for interim figures. */
  audits: { question: string; suspects: LabelSuspect[] }[];
}

/**
 * The candidate from the examples read, or null while some outcome of some question has fewer than
 * ACCEPTANCE.folds examples (too few to deal one into every fold). A text example is evaluated when
 * the base's zero-shot answer to it was read (every example, in a job started since k-fold acceptance).
 */
export function candidateOf(task: Questions, modality: "text" | "image", examples: readonly ReadExample[], options: { seed: string; nested: boolean }): Candidate | null {
  const questions = [...task];
  const outcomes = questions.map(([, question]) => trainingOutcomes(question, modality).length);
  const enough = questions.every((_, q) => Array.from({ length: outcomes[q]! }, (_, k) => examples.filter((e) => e.outcomes[q] === k).length >= ACCEPTANCE.folds).every(Boolean));
  if (!enough) return null;
  const folds = stratifiedFolds(examples.map((e) => e.outcomes[0]!), ACCEPTANCE.folds, options.seed);
  const evaluated = examples.flatMap((e, i) => (modality === "image" || e.zeroShot ? [i] : []));
  const truthOf = (q: number) => evaluated.map((i) => examples[i]!.outcomes[q]!);
  if (modality === "image") return imageCandidate(questions[0]!, outcomes[0]!, examples, folds, evaluated, truthOf(0), options);

  // The sentence embedding is an input only when every example has one, from one encoder.
  const encoders = new Set(examples.map((e) => e.embedding?.encoder ?? null));
  const encoder = encoders.size === 1 ? [...encoders][0]! : null;
  const reads = examples.map((e) => splitReads(e.features, outcomes, encoder ? e.embedding!.values : null));
  const named = (params: HeadParams): HeadParams => (params.inputs?.includes("sentence_embedding") ? { ...params, encoder: encoder! } : params);
  const heads: HeadParams[] = [];
  const audits: Candidate["audits"] = [];
  const evaluations = questions.map(([id, question], q) => {
    const y = examples.map((e) => e.outcomes[q]!);
    const readsOf = (idx: readonly number[]) => idx.map((i) => reads[i]![q]!);
    const served = named(chooseHead(readsOf(examples.map((_, i) => i)), y, outcomes[q]!).params);
    heads.push(served);
    const fit = (training: number[]): HeadParams =>
      options.nested
        ? chooseHead(readsOf(training), training.map((i) => y[i]!), outcomes[q]!).params
        : { ...trainHead(training.map((i) => headInput(reads[i]![q]!, served.inputs!)), training.map((i) => y[i]!), outcomes[q]!).params, inputs: served.inputs };
    const answers = outOfFold(examples.length, folds, fit, (params, i) => applyHead(params, headInput(reads[i]![q]!, params.inputs!)));
    if (options.nested) audits.push({ question: id, suspects: auditLabels(answers, y, outcomes[q]!) });
    return evaluateQuestion(
      id,
      question,
      evaluated.map((i) => answers[i]!),
      evaluated.map((i) => examples[i]!.zeroShot![q]!),
      truthOf(q),
      { baseline: "zero_shot", seed: `${options.seed}:${id}` },
    );
  });
  const width = (reads[0]![0] as QuestionRead).answer_state.length;
  const curve = options.nested
    ? learningCurve(examples, options.seed, (subset, folds) =>
        questions.map(([id, question], q) => {
          const y = (i: number) => examples[i]!.outcomes[q]!;
          const x = (i: number) => headInput(reads[i]![q]!, heads[q]!.inputs!);
          const answers = outOfFold(subset.length, folds, (training) => trainHead(training.map((j) => x(subset[j]!)), training.map((j) => y(subset[j]!)), outcomes[q]!).params, (params, j) => applyHead(params, x(subset[j]!)));
          const scored = subset.flatMap((i, j) => (examples[i]!.zeroShot ? [j] : []));
          const truth = scored.map((j) => y(subset[j]!));
          return {
            question: id,
            candidate: figuresOf(question.type, scored.map((j) => answers[j]!), truth).figures.primary,
            zero_shot: figuresOf(question.type, scored.map((j) => examples[subset[j]!]!.zeroShot![q]!), truth).figures.primary,
          };
        }),
      )
    : [];
  return { heads: { kind: "hidden_state_head", features: width, questions: heads }, evaluations, curve, unknown: null, training: examples.length, heldOut: evaluated.length, audits };
}

/**
 * What the customer should do next, in a sentence, from the questions' judgements and the learning
 * curve; null when there is nothing to add to an acceptance.
 */
export function adviceFor(evaluations: readonly QuestionEvaluation[], curve: NonNullable<EvaluationReport["learning_curve"]>): string | null {
  const failed = evaluations.filter((e) => !e.passed);
  if (failed.length === 0) {
    const atCeiling = evaluations.filter((e) => e.uncertainty?.at_ceiling && e.uncertainty.difference.low < ACCEPTANCE.margin);
    return atCeiling.length > 0
      ? `The shared model already answers ${atCeiling.map((e) => JSON.stringify(e.question)).join(", ")} about as well as it can be answered; this model is as good and better calibrated.`
      : null;
  }
  if (failed.some((e) => e.uncertainty?.at_ceiling)) return "Use the shared model: it already answers this question about as well as it can be answered, so a trained model has nothing to add.";
  if (failed.every((e) => e.uncertainty && e.uncertainty.difference.low >= ACCEPTANCE.margin)) {
    return "The model beats the shared model but its probabilities are not calibrated within the bound: more examples give its calibration more to fit.";
  }
  const [before, last] = curve.slice(-2);
  const rising = before && last ? failed.filter((e) => {
    const at = (p: typeof last) => p.questions.find((q) => q.question === e.question)!.candidate;
    return at(last) - at(before) >= ACCEPTANCE.margin;
  }) : [];
  if (before && last && rising.length > 0) {
    const q = rising[0]!.question;
    const at = (p: typeof last) => p.questions.find((x) => x.question === q)!.candidate.toFixed(3);
    return `The cross-validated figure of ${JSON.stringify(q)} was still rising (${at(before)} with ${before.examples} examples, ${at(last)} with ${last.examples}): more examples would likely help; about twice as many is a reasonable next try.`;
  }
  if (!before || !last) return "Too few examples to draw a learning curve: add examples of every answer and train again.";
  return "The figure was flat over the last examples, so more examples of the same kind are unlikely to help: check that the labels are consistent, or state the question more precisely.";
}

/** Fractions of the examples the learning curve is measured at. */
export const CURVE_FRACTIONS = [0.25, 0.5, 0.75, 1];

/**
 * The learning curve: `point` measured on nested subsets of the examples (a seeded order, each
 * outcome of the first question dealt in turn, so every prefix is about as balanced as the whole),
 * skipping a fraction whose subset has fewer than ACCEPTANCE.folds examples of some outcome of any question.
 */
function learningCurve(
  examples: readonly ReadExample[],
  seed: string,
  point: (subset: number[], folds: number[]) => { question: string; candidate: number; zero_shot: number }[],
): NonNullable<EvaluationReport["learning_curve"]> {
  const order = stratifiedOrder(examples.map((e) => e.outcomes[0]!), seed);
  const questions = examples[0]!.outcomes.length;
  const out: NonNullable<EvaluationReport["learning_curve"]> = [];
  for (const fraction of CURVE_FRACTIONS) {
    const subset = order.slice(0, Math.round(fraction * examples.length));
    const counts = (q: number) => subset.reduce((m, i) => m.set(examples[i]!.outcomes[q]!, (m.get(examples[i]!.outcomes[q]!) ?? 0) + 1), new Map<number, number>());
    const all = (q: number) => new Set(examples.map((e) => e.outcomes[q]!));
    const enough = Array.from({ length: questions }, (_, q) => [...all(q)].every((k) => (counts(q).get(k) ?? 0) >= ACCEPTANCE.folds)).every(Boolean);
    if (!enough) continue;
    const folds = stratifiedFolds(subset.map((i) => examples[i]!.outcomes[0]!), ACCEPTANCE.folds, `${seed}:${subset.length}`);
    out.push({ examples: subset.length, questions: point(subset, folds) });
  }
  return out;
}

/** An image model's one question (its answers, then "other"): one head on the backbone's features, against chance. */
function imageCandidate(
  [id, question]: [string, Question],
  classes: number,
  examples: readonly ReadExample[],
  folds: readonly number[],
  evaluated: readonly number[],
  truth: readonly number[],
  { seed, nested }: { seed: string; nested: boolean },
): Candidate {
  const y = examples.map((e) => e.outcomes[0]!);
  const fit = (training: number[]) => trainHead(training.map((i) => examples[i]!.features), training.map((i) => y[i]!), classes).params;
  const prior = (training: number[]) => Array.from({ length: classes }, (_, k) => training.filter((i) => y[i] === k).length / training.length);
  const answers = outOfFold(examples.length, folds, fit, (params, i) => applyHead(params, examples[i]!.features));
  const chance = outOfFold(examples.length, folds, prior, (p) => p);
  const candidate = evaluated.map((i) => answers[i]!);
  const served = trainHead(examples.map((e) => e.features), y, classes).params;
  const curve = learningCurve(examples, seed, (subset, subsetFolds) => {
    const answersOf = outOfFold(subset.length, subsetFolds, (training) => fit(training.map((j) => subset[j]!)), (params, j) => applyHead(params, examples[subset[j]!]!.features));
    const chanceOf = outOfFold(subset.length, subsetFolds, (training) => prior(training.map((j) => subset[j]!)), (p) => p);
    const labels = subset.map((i) => y[i]!);
    return [{ question: id, candidate: figuresOf("choice", answersOf, labels).figures.primary, zero_shot: figuresOf("choice", chanceOf, labels).figures.primary }];
  });
  return {
    heads: { kind: "image_head", features: examples[0]!.features.length, questions: [served] },
    curve,
    evaluations: [evaluateQuestion(id, question, candidate, evaluated.map((i) => chance[i]!), truth, { baseline: "chance", seed: `${seed}:${id}` })],
    unknown: unknownDetection(candidate, truth, classes - 1),
    training: examples.length,
    heldOut: evaluated.length,
    audits: nested ? [{ question: id, suspects: auditLabels(answers, y, classes) }] : [],
  };
}
