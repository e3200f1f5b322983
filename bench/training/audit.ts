/**
 * The label audit's stage of the training benchmark (sidecar/train/label-audit.ts), on the features
 * the benchmark has read already (no pass more): in each task's first `size` training items, a tenth
 * of the labels are flipped to another outcome at random (seeded by the task), every item is answered
 * out of fold (5 folds stratified by the given labels, as a training's acceptance does) by heads on
 * the inputs the clean training chose, and the answers are audited.
 *
 * - Found: the share of the flipped items among the first tenth of the audit's ranking (the bar:
 *   at least 70 %), and the audit's precision over everything it flags.
 * - Recovered: on the held-out items (never flipped, never chosen on), the log loss of heads trained
 *   on the clean labels, on the flipped ones, and on the flipped ones less every flagged item; the
 *   share of the loss the flips caused that leaving the flagged items out gives back (the bar: at
 *   least half), with a paired bootstrap interval over the held-out items.
 *
 *     const row = auditStage(task, 1000, reads, heldOutReads, inputs);   // or null when too few were read
 */
import { outOfFold, stratifiedFolds } from "../../sidecar/train/acceptance.ts";
import { headInput, type QuestionRead } from "../../sidecar/train/features.ts";
import { applyHead, trainHead } from "../../sidecar/train/head.ts";
import { auditLabels } from "../../sidecar/train/label-audit.ts";
import type { FeatureBlock } from "../../contract/trainings.ts";
import { seededRandom } from "../../server-shared/random.ts";
import type { Task, TaskItem } from "./data.ts";

/** The share of labels flipped, and of the ranking looked at first. */
const FLIPPED = 0.1;
const FOLDS = 5;
const RESAMPLES = 1000;

export interface AuditRow {
  task: string;
  items: number;
  flipped: number;
  flagged: number;
  /** Flipped items among the first tenth of the ranking, over the flipped items. */
  foundInTop: number;
  /** Flipped items among everything flagged, over the flagged. */
  precision: number;
  heldOut: number;
  logLoss: { clean: number; flipped: number; cleaned: number };
  /** (flipped - cleaned) / (flipped - clean): the share of the flips' loss given back; null when the flips cost nothing. */
  recovered: { estimate: number; low: number; high: number } | null;
}

/**
 * The stage on `training` (items with their reads) and `heldOut`, heads on `inputs`. Null when fewer
 * than FOLDS items of some outcome were read.
 */
export function auditStage(
  task: Task,
  training: readonly { item: TaskItem; read: QuestionRead }[],
  heldOut: readonly { item: TaskItem; read: QuestionRead }[],
  inputs: readonly FeatureBlock[],
): AuditRow | null {
  const classes = task.outcomes.length;
  const truth = training.map((t) => t.item.truth);
  if (Array.from({ length: classes }, (_, k) => truth.filter((y) => y === k).length).some((n) => n < FOLDS)) return null;
  const random = seededRandom(`audit:${task.name}`);
  const flipped = new Set<number>();
  while (flipped.size < Math.round(FLIPPED * training.length)) flipped.add(Math.floor(random() * training.length));
  const given = truth.map((y, i) => (flipped.has(i) ? (y + 1 + Math.floor(random() * (classes - 1))) % classes : y));

  const x = training.map((t) => headInput(t.read, inputs));
  const fit = (idx: readonly number[], labels: readonly number[]) => trainHead(idx.map((i) => x[i]!), idx.map((i) => labels[i]!), classes).params;
  const folds = stratifiedFolds(given, FOLDS, `audit:${task.name}`);
  const answers = outOfFold(training.length, folds, (idx) => fit(idx, given), (params, i) => applyHead(params, x[i]!));
  const suspects = auditLabels(answers, given, classes);
  const top = suspects.slice(0, Math.round(FLIPPED * training.length));
  const flagged = new Set(suspects.map((s) => s.index));

  const all = training.map((_, i) => i);
  const heads = { clean: fit(all, truth), flipped: fit(all, given), cleaned: fit(all.filter((i) => !flagged.has(i)), given) };
  const heldX = heldOut.map((h) => headInput(h.read, inputs));
  const heldTruth = heldOut.map((h) => h.item.truth);
  const losses = (params: ReturnType<typeof fit>) => heldX.map((xi, i) => -Math.log(Math.max(1e-12, applyHead(params, xi)[heldTruth[i]!]!)));
  const per = { clean: losses(heads.clean), flipped: losses(heads.flipped), cleaned: losses(heads.cleaned) };
  const mean = (xs: readonly number[], idx: readonly number[]) => idx.reduce((s, i) => s + xs[i]!, 0) / idx.length;
  const recoveredOf = (idx: readonly number[]) => {
    const cost = mean(per.flipped, idx) - mean(per.clean, idx);
    return cost > 0 ? (mean(per.flipped, idx) - mean(per.cleaned, idx)) / cost : null;
  };
  const every = heldOut.map((_, i) => i);
  const estimate = recoveredOf(every);
  let recovered: AuditRow["recovered"] = null;
  if (estimate !== null) {
    const resample = seededRandom(`audit-bootstrap:${task.name}`);
    const draws = Array.from({ length: RESAMPLES }, () => recoveredOf(every.map(() => Math.floor(resample() * every.length)))).filter((r): r is number => r !== null);
    draws.sort((a, b) => a - b);
    recovered = { estimate, low: draws[Math.floor(0.025 * draws.length)] ?? estimate, high: draws[Math.ceil(0.975 * draws.length) - 1] ?? estimate };
  }
  return {
    task: task.name,
    items: training.length,
    flipped: flipped.size,
    flagged: flagged.size,
    foundInTop: top.filter((s) => flipped.has(s.index)).length / flipped.size,
    precision: suspects.length === 0 ? 0 : suspects.filter((s) => flipped.has(s.index)).length / suspects.length,
    heldOut: heldOut.length,
    logLoss: { clean: mean(per.clean, every), flipped: mean(per.flipped, every), cleaned: mean(per.cleaned, every) },
    recovered,
  };
}

/** The stage's table, one row per task. */
export function printAudit(rows: readonly AuditRow[]): void {
  console.log("\n### label audit: 10 % of the training labels flipped at random (seeded), audited out of fold (bars: top 10 % holds >= 70 %; >= half the loss recovered)\n");
  console.log("| task | training items | flipped | flagged | flipped in the top 10 % | precision of the flags | held-out log loss: clean / flipped / without the flagged | loss recovered (95 % interval) |");
  console.log("|---|---:|---:|---:|---:|---:|---|---|");
  for (const r of rows) {
    const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
    const rec = r.recovered ? `${pct(r.recovered.estimate)} [${pct(r.recovered.low)}, ${pct(r.recovered.high)}]` : "the flips cost nothing";
    console.log(
      `| ${r.task} | ${r.items} | ${r.flipped} | ${r.flagged} | ${pct(r.foundInTop)} | ${pct(r.precision)} | ${r.logLoss.clean.toFixed(3)} / ${r.logLoss.flipped.toFixed(3)} / ${r.logLoss.cleaned.toFixed(3)} (${r.heldOut} items) | ${rec} |`,
    );
  }
}
