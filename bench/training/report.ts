/**
 * The training benchmark's figures and printout (pure apart from printing): per task, the zero-shot
 * readout step by step and the heads trained on the nested training sets, all on the same held-out
 * items through sidecar/train/evaluate.ts `figuresOf` (ECE over 10 bins); the training and serving
 * costs; the issue's targets at 300 examples; and the answers a user would see to three first tries.
 * Rows built from fewer items than asked for say so, and the run says it is incomplete.
 *
 *     const heads = fitHeads(task, [100, 300, 1000], features);
 *     printTask(results, heads);
 */
import type { QuestionFigures } from "../../contract/trainings.ts";
import type { QuestionType } from "../../contract/calibration.ts";
import { applyPlatt, applyTemperature, fitPlatt, fitTemperature } from "../../sidecar/decide/calibration.ts";
import { primaryInterval } from "../../sidecar/train/acceptance.ts";
import { figuresOf } from "../../sidecar/train/evaluate.ts";
import type { FeatureBlock } from "../../contract/trainings.ts";
import { splitReads, headInput, type QuestionRead } from "../../sidecar/train/features.ts";
import { applyHead, INPUT_SETS, trainHead, type TrainedHead } from "../../sidecar/train/head.ts";
import type { Embedding, Features, Served, ZeroShot } from "./cache.ts";
import type { Task, TaskItem } from "./data.ts";
import type { StepPrefix } from "./read.ts";

/** What the cache holds for one task. */
export interface TaskResults {
  task: Task;
  prefixes: StepPrefix[];
  features: (id: string) => Features | undefined;
  /** The state's sentence embedding (absent where not read, or the runtime has no encoder). */
  embedding: (id: string) => Embedding | undefined;
  zeroShot: (prefix: string, id: string) => ZeroShot | undefined;
  /** Training-part sizes whose served zero-shot answers fit a release calibration. */
  calibrationSizes: number[];
  serving: { zeroShot: Served[]; trained: Served[]; applyHeadMs: number } | null;
  /** Training items of a choice task read both ways for the option-order check (printOrderBias). */
  orderCheck: number;
}

export interface FittedHead {
  size: number;
  /** Training examples with features (fewer than `size` when the run stopped early). */
  used: number;
  /** The head cross-validation chose among `bySet` (chooseHead's choice), with its inputs; null when too few were read. */
  head: TrainedHead | null;
  /** A head per input set (INPUT_SETS), each with its best cross-validated log loss inside the training examples. */
  bySet: { inputs: readonly FeatureBlock[]; head: TrainedHead; cvLogLoss: number }[];
  /** Time of fitting every set's head: what chooseHead spends. */
  fitMs: number;
  /** Mean wall time of reading one of these examples (execute.ts exampleFeatures: one hidden-state pass). */
  readMs: number | null;
}

interface Row {
  name: string;
  examples: string;
  figures: QuestionFigures | null;
  /** The primary figure's 95 % bootstrap interval on the same items. */
  interval?: { low: number; high: number };
  note: string;
}

const mean = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);
const truths = (items: TaskItem[]) => items.map((x) => x.truth);

/** One question's blocks of a cached example (features.ts), with its sentence embedding where there is one. */
export const readOf = (task: Task, f: Features, embedding?: Embedding): QuestionRead => splitReads(f.features, [task.outcomes.length], embedding?.embedding ?? null)[0]!;

/**
 * Per training size, a head per input set on the first `size` training examples with features
 * (trainHead chooses its lambda inside them), and the one whose cross-validated log loss is lowest:
 * what the training worker's chooseHead serves. Sets with the sentence embedding are fitted when
 * every one of those examples has one (`encoder`: its fingerprint, which such a head names).
 */
export function fitHeads(task: Task, sizes: number[], features: (id: string) => Features | undefined, embedding: (id: string) => Embedding | undefined, encoder: string | null): FittedHead[] {
  return sizes.map((size) => {
    const training = task.training.slice(0, size).filter((x) => features(x.id));
    const readMs = mean(training.map((x) => features(x.id)!.ms + (embedding(x.id)?.ms ?? 0)));
    if (training.length < 20 || new Set(truths(training)).size < task.outcomes.length) return { size, used: training.length, head: null, bySet: [], fitMs: 0, readMs };
    const started = performance.now();
    const embedded = encoder !== null && training.every((x) => embedding(x.id));
    const reads = training.map((x) => readOf(task, features(x.id)!, embedded ? embedding(x.id) : undefined));
    const sets = INPUT_SETS.filter((inputs) => inputs.every((block) => reads[0]![block].length > 0));
    const bySet = sets.map((inputs) => {
      const head = trainHead(reads.map((r) => headInput(r, inputs)), truths(training), task.outcomes.length);
      const params = { ...head.params, inputs: [...inputs], ...(inputs.includes("sentence_embedding") ? { encoder: encoder! } : {}) };
      return { inputs, head: { ...head, params }, cvLogLoss: Math.min(...head.cv) };
    });
    const chosen = bySet.reduce((best, x) => (x.cvLogLoss < best.cvLogLoss ? x : best));
    return { size, used: training.length, head: chosen.head, bySet, fitMs: performance.now() - started, readMs };
  });
}

function rowsOf(r: TaskResults, heads: FittedHead[]): Row[] {
  const { task } = r;
  const measured = (ps: number[][], items: TaskItem[]) => (items.length === 0 ? null : figuresOf(task.type, ps, truths(items)).figures);
  const interval = (ps: number[][], items: TaskItem[]) => (items.length === 0 ? undefined : primaryInterval(task.type, ps, truths(items), `bench:${task.name}`));
  const partial = (n: number, of: number) => (n < of ? ` (${n} of ${of} held-out items read)` : "");
  const rows: Row[] = [];
  const zeroShotRow = (prefix: StepPrefix, name: string) => {
    const held = task.heldOut.filter((x) => r.zeroShot(prefix.key, x.id));
    const answers = held.map((x) => r.zeroShot(prefix.key, x.id)!);
    const passes = mean(answers.map((a) => a.passes));
    rows.push({ name, examples: "0", figures: measured(answers.map((a) => a.p), held), interval: interval(answers.map((a) => a.p), held), note: `${passes === null ? "-" : passes.toFixed(1)} passes/decision${partial(held.length, task.heldOut.length)}` });
  };
  const served = r.prefixes.find((p) => p.served)!;
  zeroShotRow(served, "zero-shot: served readout");
  for (const prefix of r.prefixes) zeroShotRow(prefix, `zero-shot: ${prefix.name}`);
  for (const size of r.calibrationSizes) {
    const fit = task.training.slice(0, size).filter((x) => r.zeroShot(served.key, x.id));
    const held = task.heldOut.filter((x) => r.zeroShot(served.key, x.id));
    const name = `zero-shot: + release calibration`;
    if (fit.length < 20 || held.length === 0 || new Set(truths(fit)).size < 2) {
      rows.push({ name, examples: `${fit.length}/${size}`, figures: null, note: "too few training-part answers read" });
      continue;
    }
    const { apply, params } = releaseCalibration(task, size, (id) => r.zeroShot(served.key, id))!;
    rows.push({
      name,
      examples: fit.length < size ? `${fit.length}/${size}` : String(size),
      figures: measured(held.map((x) => apply(r.zeroShot(served.key, x.id)!.p)), held),
      note: `fitted on the training part's served answers: ${params}${partial(held.length, task.heldOut.length)}`,
    });
  }
  const held = task.heldOut.filter((x) => r.features(x.id));
  const heldReads = held.map((x) => readOf(task, r.features(x.id)!, r.embedding(x.id)));
  const headRow = (name: string, examples: string, head: TrainedHead, extra: string) => {
    const { params } = head;
    const calibration = "slope" in params.calibration ? `Platt ${params.calibration.slope.toFixed(2)}/${params.calibration.bias.toFixed(2)}` : `T ${params.calibration.temperature.toFixed(2)}`;
    const answers = heldReads.map((x) => applyHead(params, headInput(x, params.inputs!)));
    rows.push({
      name,
      examples,
      figures: measured(answers, held),
      interval: interval(answers, held),
      note: `1 pass/decision; lambda ${params.lambda}, ${calibration}${extra}${partial(held.length, task.heldOut.length)}`,
    });
  };
  for (const h of heads) {
    const examples = h.used < h.size ? `${h.used}/${h.size}` : String(h.size);
    if (!h.head) {
      rows.push({ name: "trained head: chosen by CV", examples, figures: null, note: "too few training examples read" });
      continue;
    }
    for (const set of h.bySet) headRow(`trained head: ${set.inputs.join(" + ")}`, examples, set.head, `; CV log loss ${set.cvLogLoss.toFixed(3)}`);
    headRow("trained head: chosen by CV", examples, h.head, `; chose ${h.head.params.inputs!.join(" + ")}`);
  }
  return rows;
}

const f3 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? "-" : x.toFixed(3));

export function printTask(r: TaskResults, heads: FittedHead[]): Row[] {
  const { task } = r;
  const metric = task.type === "noul" ? "AUROC" : "top-1";
  const rows = rowsOf(r, heads);
  console.log(`\n### ${task.name}: ${task.type === "noul" ? "yes/no" : `${task.type} of ${task.outcomes.length}`} (${task.outcomes.join(" | ")})`);
  console.log(`question: ${JSON.stringify(task.question)}`);
  console.log(`held-out: ${task.heldOut.length} items (${task.outcomes.map((_, k) => task.heldOut.filter((x) => x.truth === k).length).join("/")}); training part: ${task.usable.training} usable, the first ${task.training.length} used\n`);
  console.log(`| readout | training examples | items | ${metric} | 95 % interval | accuracy | ECE | log loss | Brier | note |`);
  console.log("|---|---:|---:|---:|---|---:|---:|---:|---:|---|");
  for (const row of rows) {
    const g = row.figures;
    const ci = row.interval ? `${f3(row.interval.low)}-${f3(row.interval.high)}` : "-";
    console.log(`| ${row.name} | ${row.examples} | ${g?.items ?? 0} | ${f3(g?.primary)} | ${ci} | ${f3(g?.accuracy)} | ${f3(g?.ece)} | ${f3(g?.log_loss)} | ${f3(g?.brier)} | ${row.note} |`);
  }

  printStepGains(task, rows);
  if (task.type === "choice") printOrderBias(r);

  console.log(`\ntraining wall time (one hidden-state pass per example read, pooling the state, and its sentence embedding; then a head per input set: trainHead's 3-fold CV over 5 lambdas, calibration, refit, up to ${INPUT_SETS.length} times):\n`);
  console.log("| examples | read ms/example | reading all of them | fitting every set (chooseHead) | chosen | lambda |");
  console.log("|---:|---:|---:|---:|---|---:|");
  for (const h of heads) {
    const reading = h.readMs === null ? "-" : `${((h.readMs * h.used) / 60_000).toFixed(1)} min`;
    console.log(
      `| ${h.used < h.size ? `${h.used}/${h.size}` : h.size} | ${h.readMs === null ? "-" : h.readMs.toFixed(0)} | ${reading} | ${h.head ? `${(h.fitMs / 1000).toFixed(2)} s` : "-"} | ${h.head?.params.inputs?.join(" + ") ?? "-"} | ${h.head?.params.lambda ?? "-"} |`,
    );
  }

  console.log("\nserving cost per decision, timed through the runtime, the two kinds interleaved on the same held-out items:\n");
  if (!r.serving) console.log("not measured in this run (see above)");
  else {
    const line = (name: string, served: Served[]) => {
      const ms = served.map((s) => s.ms).sort((a, b) => a - b);
      const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))]!;
      console.log(`| ${name} | ${served.length} | ${mean(served.map((s) => s.passes))!.toFixed(1)} | ${at(0.5).toFixed(0)} | ${mean(ms)!.toFixed(0)} | ${at(0.9).toFixed(0)} |`);
    };
    console.log("| served by | decisions | passes/decision | ms median | ms mean | ms p90 |");
    console.log("|---|---:|---:|---:|---:|---:|");
    line("zero-shot, served readout", r.serving.zeroShot);
    line("trained release (300 examples)", r.serving.trained);
    console.log(`\napplyHead alone: ${(r.serving.applyHeadMs * 1000).toFixed(1)} µs per decision (in process); measured ${r.serving.trained[0]?.at.slice(0, 16) ?? "-"}`);
  }
  return rows;
}

/**
 * Option-order bias of the zero-shot choice readout (issue 36, point 6), from readings already cached:
 * the "both option orders" step is the mean of the key-order reading (the contextual step's answer)
 * and the reversed one, each contextually calibrated (execute.ts answerOf), so the reversed reading
 * is 2 x both - key. How often reversing the options flips the answer, and top-1 of each way of
 * reading them: key order, reversed, their mean (the both-orders step), their geometric mean. On the
 * training part first (`--order-check N` items: where the served reading was chosen), then on the
 * held-out part (reported, never chosen on).
 */
function printOrderBias(r: TaskResults): void {
  const { task } = r;
  for (const [part, all] of [
    ["training", task.training.slice(0, r.orderCheck)],
    ["held-out", task.heldOut],
  ] as const) {
    const items = all.filter((x) => r.zeroShot("contextual", x.id) && r.zeroShot("both-orders", x.id));
    if (items.length === 0) continue;
    const argmax = (p: readonly number[]) => p.reduce((best, v, i) => (v > p[best]! ? i : best), 0);
    const normalised = (p: number[]) => {
      const sum = p.reduce((a, b) => a + b, 0);
      return p.map((v) => v / sum);
    };
    const reads = items.map((x) => {
      const key = r.zeroShot("contextual", x.id)!.p;
      const both = r.zeroShot("both-orders", x.id)!.p;
      const reversed = normalised(key.map((k, i) => Math.max(1e-9, 2 * both[i]! - k)));
      const geometric = normalised(key.map((k, i) => Math.sqrt(Math.max(1e-12, k) * reversed[i]!)));
      return { key, reversed, both, geometric, truth: x.truth };
    });
    const top1 = (pick: (x: (typeof reads)[number]) => number[]) => reads.filter((x) => argmax(pick(x)) === x.truth).length / reads.length;
    const flips = reads.filter((x) => argmax(x.key) !== argmax(x.reversed)).length;
    console.log(`
option-order bias (${items.length} ${part} items, read both ways): reversing the options flips the answer on ${flips} (${((100 * flips) / items.length).toFixed(1)} %)`);
    console.log(
      `  top-1: key order ${f3(top1((x) => x.key))}, reversed ${f3(top1((x) => x.reversed))}, mean of both ${f3(top1((x) => x.both))}, geometric mean of both ${f3(top1((x) => x.geometric))} (both: 2 content passes)`,
    );
  }
}

/**
 * Each zero-shot step against the step before it (point 10): it helps where it raises the primary
 * figure without raising the log loss, or lowers the log loss without lowering the primary figure.
 */
function printStepGains(task: Task, rows: Row[]): void {
  const zeroShot = rows.filter((x) => x.name.startsWith("zero-shot: ") && x.name !== "zero-shot: served readout" && x.figures);
  const prefixes = zeroShot.filter((x) => x.examples === "0");
  if (prefixes.length < 2) return;
  const metric = task.type === "noul" ? "AUROC" : "top-1";
  const signed = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(3)}`;
  console.log("\neach zero-shot step against the one before it (a release calibration against the served readout it calibrates):\n");
  const served = rows.find((x) => x.name === "zero-shot: served readout")!;
  const calibrations = served?.figures ? zeroShot.filter((x) => x.examples !== "0").map((x) => [served, x] as const) : [];
  const pairs = [...prefixes.slice(1).map((x, i) => [prefixes[i]!, x] as const), ...calibrations];
  for (const [before, after] of pairs) {
    const [a, b] = [before.figures!, after.figures!];
    const primary = b.primary - a.primary;
    const logLoss = b.log_loss - a.log_loss;
    const verdict = primary >= 0 && logLoss <= 0 ? "helps" : primary <= 0 && logLoss >= 0 ? "hurts" : "mixed";
    const name = `${after.name.slice("zero-shot: ".length)}${after.examples === "0" ? "" : ` (fitted on ${after.examples})`}`;
    console.log(`  ${name.padEnd(44)} ${metric} ${signed(primary)}, ECE ${signed(b.ece - a.ece)}, log loss ${signed(logLoss)}, Brier ${signed(b.brier - a.brier)}: ${verdict}`);
  }
}

/**
 * Issue 36's targets at 300 examples (the head cross-validation chose, never tuned on the held-out
 * items), against the served zero-shot readout on the same items: a sentiment yes/no AUROC >= 0.92 and
 * ECE <= 0.05; a topic or intent choice top-1 >= 1.5 x zero-shot and ECE <= 0.05; spam AUROC >= 0.99.
 */
export function printTargets(task: Task, rows: Row[]): void {
  const zero = rows.find((x) => x.name === "zero-shot: served readout")?.figures;
  const trained = rows.find((x) => x.name === "trained head: chosen by CV" && (x.examples === "300" || x.examples.endsWith("/300")))?.figures;
  if (!zero || !trained) {
    console.log(`  ${task.name}: not enough read to check (see the table)`);
    return;
  }
  const incomplete = trained.items < task.heldOut.length || zero.items < task.heldOut.length || rows.some((x) => x.name.startsWith("trained head") && x.examples.endsWith("/300"));
  if (incomplete) console.log(`  ${task.name}: INCOMPLETE reads: the line below is on ${trained.items} and ${zero.items} held-out items, not ${task.heldOut.length}, or on fewer than 300 examples`);
  const verdict = (met: boolean) => (met ? "PASS" : "MISS");
  if (task.name === "spam") {
    console.log(`  spam (yes/no), 300 examples: AUROC ${f3(trained.primary)} (>= 0.99; zero-shot ${f3(zero.primary)}): ${verdict(trained.primary >= 0.99)}`);
  } else if (task.type === "noul") {
    console.log(
      `  ${task.name} (yes/no), 300 examples: AUROC ${f3(trained.primary)} (>= 0.92), ECE ${f3(trained.ece)} (<= 0.05); zero-shot AUROC ${f3(zero.primary)}: ` +
        verdict(trained.primary >= 0.92 && trained.ece <= 0.05),
    );
  } else {
    console.log(
      `  ${task.name} (choice), 300 examples: top-1 ${f3(trained.primary)} vs 1.5 x zero-shot ${f3(zero.primary)} = ${f3(1.5 * zero.primary)}, ECE ${f3(trained.ece)} (<= 0.05): ` +
        verdict(trained.primary >= 1.5 * zero.primary && trained.ece <= 0.05),
    );
  }
}

/** The three first tries, answered by every zero-shot step (and by the release calibrations fitted on the tasks). */
export function printUserQuestions(
  questions: { id: string; name: string; type: QuestionType; options: string[] }[],
  prefixes: (type: QuestionType) => StepPrefix[],
  zeroShot: (prefix: string, id: string) => ZeroShot | undefined,
  calibrations: Record<QuestionType, ((p: number[]) => number[]) | null> & { fittedOn: number },
): void {
  console.log(`\n### tried as a user would (zero-shot, each step prefix; the last line applies the release calibration fitted on ${calibrations.fittedOn} training answers of the task of the same type)\n`);
  const shown = (type: QuestionType, options: string[], p: number[]) =>
    type === "noul" ? `p(yes) ${p[0]!.toFixed(2)}` : options.map((o, i) => `${o} ${p[i]!.toFixed(2)}`).join(", ");
  for (const q of questions) {
    console.log(`${q.name}`);
    const steps = prefixes(q.type);
    for (const prefix of steps) {
      const z = zeroShot(prefix.key, q.id);
      console.log(`  ${prefix.name.padEnd(36)} ${z ? `${shown(q.type, q.options, z.p)}  (${z.passes} passes)` : "not read"}`);
    }
    const served = zeroShot(steps.find((p) => p.served)!.key, q.id);
    const calibrate = calibrations[q.type];
    console.log(`  ${"+ release calibration".padEnd(36)} ${served && calibrate ? shown(q.type, q.options, calibrate(served.p)) : "-"}`);
  }
}

/** The release calibration fitted on the first `size` training answers of a task (Platt for yes/no, a temperature for a choice), as calibratedAnswer applies it. */
export function releaseCalibration(task: Task, size: number, answer: (id: string) => ZeroShot | undefined): { apply: (p: number[]) => number[]; params: string } | null {
  const fit = task.training.slice(0, size).filter((x) => answer(x.id));
  if (fit.length < 20 || new Set(truths(fit)).size < 2) return null;
  const ps = fit.map((x) => answer(x.id)!.p);
  if (task.type === "noul") {
    const platt = fitPlatt(ps.map((p) => p[0]!), fit.map((x) => x.truth === 0));
    return { apply: (p) => [applyPlatt(p[0]!, platt), 1 - applyPlatt(p[0]!, platt)], params: `Platt slope ${platt.slope.toFixed(2)}, bias ${platt.bias.toFixed(2)}` };
  }
  const temperature = fitTemperature(ps, truths(fit));
  return { apply: (p) => applyTemperature(p, temperature), params: `temperature ${temperature.toFixed(2)}` };
}
