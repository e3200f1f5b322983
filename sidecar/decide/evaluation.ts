/**
 * Labelled decisions read through the sidecar's readout, their figures, and a release's calibration
 * fitted on them (runs where a runtime is reachable: the quality benchmark, and the operator's
 * `npm run registry -- calibrate`). Pure except for `readLabelled`, which runs passes.
 *
 *     const read = await readLabelled(client, release, items, SERVED_STEPS_UNCALIBRATED);
 *     const calibration = fitCalibration(read.filter(inFittingPart));
 *     figures("noul", read.map((r) => calibrated(r, calibration)));
 *
 * A labelled item is one decision with one question and its true answer: `true`/`false` for noul, the
 * option name for choice, the 0-based level for score.
 */
import { z } from "zod";
import type { Figures, QuestionType, ReliabilityBin } from "../../contract/calibration.ts";
import { Questions, State, type Answer } from "../../contract/decision.ts";
import { fields, JsonValue } from "../../contract/fields.ts";
import { auroc, binaryBrier, brier, eceOfBins, reliabilityBins } from "../../server-shared/quality.ts";
import type { RuntimeClient } from "../runtime/client.ts";
import { fitPlatt, fitTemperature, IDENTITY_CALIBRATION, type Calibration } from "./calibration.ts";
import { executeDecision } from "./execute.ts";
import type { Steps } from "./steps.ts";
import type { Release } from "./identity.ts";
import { outcomeIndex } from "../../contract/training-file.ts";
import { calibratedAnswer } from "./readout.ts";

/** One line of a labelled file. */
export const LabelledItem = fields({
  state: State,
  questions: Questions.refine((q) => q.size === 1, "a labelled item asks exactly one question"),
  /** The true answer: a boolean (noul), an option name (choice) or a 0-based level (score). */
  label: JsonValue,
});
export type LabelledItem = z.infer<typeof LabelledItem>;

/** An item's answer as read, with its true answer as an index into the answer's labels (noul: 0 yes, 1 no). */
export interface ReadItem {
  type: QuestionType;
  answer: Answer;
  truth: number;
  passes: number;
}

/** The true answer of an item as an index into its answer's labels; throws on a label the question cannot have. */
export function truthIndex(item: LabelledItem): number {
  const index = outcomeIndex([...item.questions.values()][0]!, item.label);
  if (typeof index === "string") throw new RangeError(index);
  return index;
}

/** Reads every item through the readout `steps` (serially, as the GPU lane would). */
export async function readLabelled(client: RuntimeClient, release: Release, items: readonly LabelledItem[], steps: Steps): Promise<ReadItem[]> {
  const read: ReadItem[] = [];
  for (const item of items) {
    const execution = await executeDecision(client, release, { state: item.state, questions: item.questions }, undefined, steps);
    const answer = [...execution.answers.values()][0]!;
    read.push({ type: answer.type, answer, truth: truthIndex(item), passes: execution.passes });
  }
  return read;
}

/** An answer's distribution over its labels, in offered order (noul: [p(yes), p(no)]). */
export function distribution(answer: Answer): number[] {
  return answer.type === "noul" ? [answer.noul, 1 - answer.noul] : [...answer.probabilities.values()];
}

/** The most probable label's index (ties: the first, as the readout breaks them). */
function top(p: readonly number[]): number {
  return p.reduce((best, pi, i) => (pi > p[best]! ? i : best), 0);
}

/**
 * The reliability bins of a set of read items: noul over p(yes) against the truth; choice and score
 * over the top probability against whether the top label is the true one.
 */
export function reliability(items: readonly ReadItem[]): ReliabilityBin[] {
  if (items[0]?.type === "noul") return reliabilityBins(items.map((r) => distribution(r.answer)[0]!), items.map((r) => r.truth === 0));
  const ps = items.map((r) => distribution(r.answer));
  return reliabilityBins(ps.map((p) => Math.max(...p)), ps.map((p, i) => top(p) === items[i]!.truth));
}

/** Figures of read items of one type (contract/calibration.ts `Figures`). */
export function figures(items: readonly ReadItem[]): Figures {
  if (items.length === 0) throw new RangeError("no items to measure");
  const ps = items.map((r) => distribution(r.answer));
  const noul = items[0]!.type === "noul";
  const positives = items.map((r) => r.truth === 0);
  return {
    items: items.length,
    accuracy: ps.filter((p, i) => top(p) === items[i]!.truth).length / items.length,
    auroc: noul ? auroc(ps.map((p) => p[0]!), positives) : null,
    ece: eceOfBins(reliability(items)),
    brier: noul ? binaryBrier(ps.map((p) => p[0]!), positives) : brier(ps, items.map((r) => r.truth)),
    option_mass: items.reduce((sum, r) => sum + (r.answer.option_mass ?? 0), 0) / items.length,
  };
}

/**
 * Position bias: how much more often the first offered label wins than it is the true answer, in
 * points (noul: the yes rate above the true-yes rate). 0 is no bias.
 */
export function firstLabelBias(items: readonly ReadItem[]): number {
  const wins = items.filter((r) => top(distribution(r.answer)) === 0).length;
  const truths = items.filter((r) => r.truth === 0).length;
  return (100 * (wins - truths)) / items.length;
}

/** Fits a calibration on read items: Platt for noul, a temperature for choice and for score; null where a type is absent. */
export function fitCalibration(items: readonly ReadItem[]): Calibration {
  const of = (type: QuestionType) => items.filter((r) => r.type === type);
  const noul = of("noul");
  const fitT = (list: ReadItem[]) => (list.length === 0 ? null : { temperature: fitTemperature(list.map((r) => distribution(r.answer)), list.map((r) => r.truth)) });
  return {
    noul: noul.length === 0 ? null : fitPlatt(noul.map((r) => distribution(r.answer)[0]!), noul.map((r) => r.truth === 0)),
    choice: fitT(of("choice")),
    score: fitT(of("score")),
  };
}

/** A read item under a calibration. */
export function calibrated(item: ReadItem, calibration: Calibration = IDENTITY_CALIBRATION): ReadItem {
  return { ...item, answer: calibratedAnswer(item.answer, calibration) };
}
