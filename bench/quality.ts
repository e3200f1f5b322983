/**
 * The quality benchmark: how well the served readout's answers follow the content, and how honest its
 * probabilities are, on labelled public data (bench/quality/data.ts), with the default model on this
 * machine's runtime (CPU here; `RUNTIME_GPU=auto` on a GPU host).
 *
 *     npm run bench:quality                       # about 5 minutes on 2 CPU cores
 *     npm run bench:quality -- --per-set 12       # a quicker, noisier run
 *     npm run bench:quality -- --labelled fit.jsonl   # also write the fitting part for `registry calibrate`
 *     npm run bench:quality -- --svg docs/quality/reliability.svg   # and the evaluation part's reliability diagram
 *
 * Each step of the readout is measured on its own, cumulatively, so every step's gain is visible:
 * render-v1 (the chat framing before this work), the completion framing, label forms and option
 * words, contextual calibration, both option orders for small choices (served: steps.ts SERVED_STEPS),
 * and the release calibration fitted on the fitting part. The rendering was chosen on the fitting part (its table is printed
 * first, with the alternatives to the served framing and labels); the targets are checked on the
 * evaluation part only.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { QUESTION_TYPES, type QuestionType } from "../contract/calibration.ts";
import { stringifyJson } from "../contract/json.ts";
import { ensureModel } from "../local/model.ts";
import { startRuntime } from "../local/tiers.ts";
import { reliabilitySvg } from "../server-shared/quality.ts";
import { calibrated, figures, firstLabelBias, fitCalibration, readLabelled, reliability, type ReadItem } from "../sidecar/decide/evaluation.ts";
import { SERVED_STEPS, type Steps } from "../sidecar/decide/steps.ts";
import { CHAT_RENDERING, SERVED_RENDERING } from "../sidecar/decide/render.ts";
import { HttpRuntimeClient } from "../sidecar/runtime/client.ts";
import { qualitySets, type BenchItem } from "./quality/data.ts";

const pct = (x: number | null) => (x === null ? "    -" : (100 * x).toFixed(1).padStart(5));
const num = (x: number) => x.toFixed(3);

const { values: args } = parseArgs({ options: { "per-set": { type: "string", default: "24" }, labelled: { type: "string" }, svg: { type: "string" } } });
const perSet = Number(args["per-set"]);

/** The served readout (SERVED_STEPS) before the release's calibration, which this benchmark fits itself. */
const SERVED: Steps = { ...SERVED_STEPS, calibration: false };
const STEPS: { name: string; steps: Steps; fittingOnly?: boolean }[] = [
  { name: "render-v1: chat framing, letters", steps: { ...SERVED, rendering: CHAT_RENDERING, contextual: false, bothOrders: false } },
  {
    name: "completion framing",
    steps: { ...SERVED, rendering: { ...SERVED_RENDERING, labelForms: false, wordLabels: false }, contextual: false, bothOrders: false },
  },
  { name: "+ label forms, option words", steps: { ...SERVED, contextual: false, bothOrders: false } },
  { name: "+ contextual calibration", steps: { ...SERVED, bothOrders: false } },
  { name: "+ both option orders (served)", steps: SERVED },
  { name: "(alternative: chat framing)", steps: { ...SERVED, rendering: { ...SERVED_RENDERING, framing: "chat" } }, fittingOnly: true },
  { name: "(alternative: letters and digits)", steps: { ...SERVED, rendering: { ...SERVED_RENDERING, wordLabels: false } }, fittingOnly: true },
];
/** The step the release calibration is fitted on and applied to: the served readout before it. */
const BEFORE_CALIBRATION = "+ both option orders (served)";
const CALIBRATED = "+ release calibration (served)";

const { fitting, evaluation } = qualitySets(perSet);
if (args.labelled) {
  writeFileSync(args.labelled, fitting.map((b) => stringifyJson(b.item)).join("\n") + "\n");
  console.log(`wrote the fitting part (${fitting.length} labelled items) to ${args.labelled}`);
}

const logDir = mkdtempSync(join(tmpdir(), "bench-quality-"));
const model = await ensureModel();
const secret = randomBytes(32).toString("hex");
const runtime = await startRuntime({ name: "runtime", modelPath: model.path, secret, logDir });
const client = new HttpRuntimeClient(runtime.url, secret);
const release = { id: runtime.ready.release_id, fingerprint: runtime.ready.fingerprint };

type Results = Map<string, { items: BenchItem[]; read: ReadItem[] }>;
const started = performance.now();
let passes = 0;
async function measure(items: BenchItem[], fittingPart: boolean): Promise<Results> {
  const results: Results = new Map();
  for (const { name, steps, fittingOnly } of STEPS) {
    if (fittingOnly && !fittingPart) continue;
    const read = await readLabelled(client, release, items.map((b) => b.item), steps);
    passes += read.reduce((sum, r) => sum + r.passes, 0);
    results.set(name, { items, read });
  }
  return results;
}

try {
  const fit = await measure(fitting, true);
  const calibration = fitCalibration(fit.get(BEFORE_CALIBRATION)!.read);
  const evaluated = await measure(evaluation, false);
  for (const results of [fit, evaluated]) {
    const base = results.get(BEFORE_CALIBRATION)!;
    results.set(CALIBRATED, { items: base.items, read: base.read.map((r) => calibrated(r, calibration)) });
  }
  const seconds = (performance.now() - started) / 1000;

  console.log(`\nquality benchmark: ${model.path.split("/").pop()} (${release.fingerprint.slice(0, 12)}), CPU runtime, ${new Date().toISOString()}`);
  console.log(`${fitting.length} fitting and ${evaluation.length} evaluation items, ${passes} passes in ${seconds.toFixed(0)} s`);
  console.log(`release calibration fitted on the fitting part: ${stringifyJson(calibration)}`);
  printPart("fitting part (where the rendering was chosen and the calibration fitted)", fit);
  printPart("evaluation part", evaluated);
  printSets(evaluated.get(CALIBRATED)!);
  printTargets(evaluated.get(CALIBRATED)!);
  if (args.svg) {
    const series = QUESTION_TYPES.flatMap((type) => [
      { name: `${type}, before`, bins: reliability(ofType(evaluated.get(BEFORE_CALIBRATION)!, type)) },
      { name: `${type}, after`, bins: reliability(ofType(evaluated.get(CALIBRATED)!, type)) },
    ]);
    writeFileSync(args.svg, reliabilitySvg(`${model.path.split("/").pop()}: evaluation part`, series) + "\n");
    console.log(`\nwrote the evaluation part's reliability diagram to ${args.svg}`);
  }
} finally {
  await runtime.child.stop();
  rmSync(logDir, { recursive: true, force: true });
}

function ofType(entry: { items: BenchItem[]; read: ReadItem[] }, type: QuestionType): ReadItem[] {
  return entry.read.filter((r) => r.type === type);
}


function printPart(title: string, results: Results): void {
  console.log(`\n${title}`);
  for (const type of QUESTION_TYPES) {
    console.log(`\n  ${type}${" ".repeat(44 - type.length)}items   acc%  ${type === "noul" ? "AUROC" : "top1%"}   ECE   Brier  mass%  bias pts  passes/item`);
    for (const [name, entry] of results) {
      const read = ofType(entry, type);
      if (read.length === 0) continue;
      const f = figures(read);
      const second = type === "noul" ? (f.auroc ?? 0).toFixed(3) : pct(f.accuracy);
      const perItem = read.reduce((s, r) => s + r.passes, 0) / read.length;
      console.log(
        `  ${name.padEnd(44)} ${String(f.items).padStart(5)}  ${pct(f.accuracy)}  ${second}  ${num(f.ece)}  ${num(f.brier)}  ${pct(f.option_mass)}  ${firstLabelBias(read).toFixed(1).padStart(7)}  ${perItem.toFixed(1).padStart(6)}`,
      );
    }
  }
}

function printSets(entry: { items: BenchItem[]; read: ReadItem[] }): void {
  console.log("\nper set, evaluation part, served readout (release calibration included)");
  const sets = [...new Set(entry.items.map((b) => b.set))];
  for (const set of sets) {
    const read = entry.read.filter((_, i) => entry.items[i]!.set === set);
    const f = figures(read);
    const auroc = f.auroc === null ? "" : `  AUROC ${f.auroc.toFixed(3)}`;
    console.log(`  ${set.padEnd(28)} ${String(read.length).padStart(4)} items  accuracy ${pct(f.accuracy)} %${auroc}  mass ${pct(f.option_mass)} %`);
  }
}

function printTargets(entry: { items: BenchItem[]; read: ReadItem[] }): void {
  const noul = figures(ofType(entry, "noul"));
  const choices = ofType(entry, "choice");
  const choice = figures(choices);
  const chance = choices.reduce((s, r) => s + 1 / (r.answer.type === "choice" ? r.answer.probabilities.size : 2), 0) / choices.length;
  const rows: [string, string, string, boolean][] = [
    ["noul AUROC", ">= 0.850", noul.auroc!.toFixed(3), noul.auroc! >= 0.85],
    ["noul ECE", "<= 0.050", num(noul.ece), noul.ece <= 0.05],
    ["choice top-1 accuracy", `>= ${(2 * chance).toFixed(3)} (2 x chance)`, num(choice.accuracy), choice.accuracy >= 2 * chance],
    ["choice ECE", "<= 0.050", num(choice.ece), choice.ece <= 0.05],
    ["choice position bias", "within 5 points", `${firstLabelBias(choices).toFixed(1)} pts`, Math.abs(firstLabelBias(choices)) <= 5],
    ["noul yes bias", "within 5 points", `${firstLabelBias(ofType(entry, "noul")).toFixed(1)} pts`, Math.abs(firstLabelBias(ofType(entry, "noul"))) <= 5],
  ];
  console.log("\ntargets on the evaluation part, served readout with the release calibration");
  for (const [what, target, value, met] of rows) console.log(`  ${what.padEnd(24)} ${target.padEnd(26)} ${value.padStart(10)}  ${met ? "met" : "MISSED"}`);
}
