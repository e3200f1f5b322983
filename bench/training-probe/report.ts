/**
 * The training probe's figures (pure apart from printing): every candidate trained on the first 100,
 * 300 and 1,000 training examples of a task and evaluated on the same held-out items as the served
 * zero-shot readout, with the issue's targets checked at 300 examples. Items whose features are not
 * cached yet are left out and the row says how many were used.
 */
import { auroc, binaryBrier, brier, ece } from "../../server-shared/quality.ts";
import { applyPlatt, applyTemperature, fitPlatt, fitTemperature } from "../../sidecar/decide/calibration.ts";
import type { ProbeItem, Task } from "./data.ts";
import type { FeatureCache, MeanFeatures, PromptFeatures } from "./features.ts";
import { applyHead, trainHead } from "../../sidecar/train/head.ts";

export interface ZeroShot {
  id: string;
  /** The served readout's distribution: [p(yes), p(no)] or the options in key order. */
  p: number[];
  passes: number;
  mass: number | null;
  ms: number;
}

interface Caches {
  prompt: FeatureCache<PromptFeatures>;
  mean: FeatureCache<MeanFeatures>;
  zeroshot: FeatureCache<ZeroShot>;
}

interface Row {
  name: string;
  size: number | null;
  trained: number;
  items: number;
  discrimination: number;
  accuracy: number;
  ece: number;
  logLoss: number;
  brier: number;
  trainSeconds: number;
  extractMs: number | null;
  note: string;
}

type Features = (id: string) => number[] | null;

function measure(task: Task, ps: number[][], truth: number[]): Omit<Row, "name" | "size" | "trained" | "trainSeconds" | "extractMs" | "note"> {
  const top = (p: number[]) => p.indexOf(Math.max(...p));
  const correct = ps.map((p, i) => top(p) === truth[i]);
  const accuracy = correct.filter(Boolean).length / ps.length;
  const logLoss = -ps.reduce((s, p, i) => s + Math.log(Math.max(1e-12, p[truth[i]!]!)), 0) / ps.length;
  if (task.type === "noul") {
    const positives = truth.map((t) => t === 0);
    const yes = ps.map((p) => p[0]!);
    return { items: ps.length, discrimination: auroc(yes, positives) ?? Number.NaN, accuracy, ece: ece(yes, positives), logLoss, brier: binaryBrier(yes, positives) };
  }
  return { items: ps.length, discrimination: accuracy, accuracy, ece: ece(ps.map((p) => Math.max(...p)), correct), logLoss, brier: brier(ps, truth) };
}

const softmax = (xs: number[]) => {
  const m = Math.max(...xs);
  const e = xs.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

const meanOf = (xs: number[]) => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);

/** Word 3-gram sets, for the near-duplicate diagnostic. */
function shingles(text: string): Set<string> {
  const words = text.toLowerCase().split(/\W+/).filter(Boolean);
  const out = new Set<string>();
  for (let i = 0; i + 2 < words.length; i++) out.add(`${words[i]} ${words[i + 1]} ${words[i + 2]}`);
  return out;
}

function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 || b.size === 0) return 0;
  let both = 0;
  for (const x of a) if (b.has(x)) both += 1;
  return both / (a.size + b.size - both);
}

/** Held-out items with a training item of Jaccard similarity >= 0.5 on word 3-grams (templates, resends). */
function nearDuplicates(task: Task): Set<string> {
  const train = task.training.map((x) => shingles(String(x.item.state)));
  const out = new Set<string>();
  for (const x of task.heldOut) {
    const s = shingles(String(x.item.state));
    if (train.some((t) => jaccard(s, t) >= 0.5)) out.add(x.id);
  }
  return out;
}

export function report(tasks: Task[], sizes: number[], caches: Caches): void {
  const candidates: { name: string; features: Features; extract: (id: string) => number | null }[] = [
    { name: "L: head on label scores", features: (id) => caches.prompt.get(id)?.scores ?? null, extract: (id) => caches.prompt.get(id)?.ms ?? null },
    { name: "a: mean-pooled state embedding", features: (id) => caches.mean.get(id)?.mean ?? null, extract: (id) => caches.mean.get(id)?.ms ?? null },
    { name: "b: answer-position hidden state", features: (id) => caches.prompt.get(id)?.hidden ?? null, extract: (id) => caches.prompt.get(id)?.ms ?? null },
    {
      name: "b+L: hidden state + label scores",
      features: (id) => {
        const f = caches.prompt.get(id);
        return f ? [...f.hidden, ...f.scores] : null;
      },
      extract: (id) => caches.prompt.get(id)?.ms ?? null,
    },
    {
      name: "a+b+L: all of the above",
      features: (id) => {
        const f = caches.prompt.get(id);
        const m = caches.mean.get(id);
        return f && m ? [...f.hidden, ...f.scores, ...m.mean] : null;
      },
      extract: (id) => {
        const f = caches.prompt.get(id);
        const m = caches.mean.get(id);
        return f && m ? f.ms + m.ms : null;
      },
    },
  ];

  for (const task of tasks) {
    const classes = task.outcomes.length;
    const rows: Row[] = [];
    const zs = task.heldOut.filter((x) => caches.zeroshot.get(x.id));
    if (zs.length > 0) {
      const entries = zs.map((x) => caches.zeroshot.get(x.id)!);
      rows.push({
        name: "zero-shot, served readout",
        size: null,
        trained: 0,
        ...measure(task, entries.map((e) => e.p), zs.map((x) => x.truth)),
        trainSeconds: 0,
        extractMs: meanOf(entries.map((e) => e.ms)),
        note: `${(entries.reduce((s, e) => s + e.passes, 0) / entries.length).toFixed(1)} passes/item, option mass ${(100 * (meanOf(entries.map((e) => e.mass ?? 0)) ?? 0)).toFixed(1)} %`,
      });
    }
    for (const size of sizes) {
      const training = task.training.slice(0, size);
      // One-pass label scores, only calibrated (Platt / temperature) on the training examples: no head.
      {
        const train = training.filter((x) => caches.prompt.get(x.id));
        const held = task.heldOut.filter((x) => caches.prompt.get(x.id));
        if (train.length >= 20 && held.length > 0) {
          const started = performance.now();
          const p = (x: ProbeItem) => softmax(caches.prompt.get(x.id)!.scores);
          const ps = train.map(p);
          const truth = train.map((x) => x.truth);
          const calibrated =
            classes === 2
              ? ((params) => (q: number[]) => [applyPlatt(q[0]!, params), 1 - applyPlatt(q[0]!, params)])(fitPlatt(ps.map((q) => q[0]!), truth.map((t) => t === 0)))
              : ((t) => (q: number[]) => applyTemperature(q, t))(fitTemperature(ps, truth));
          const out = held.map((x) => calibrated(p(x)));
          rows.push({
            name: "L0: one-pass label scores, calibrated",
            size,
            trained: train.length,
            ...measure(task, out, held.map((x) => x.truth)),
            trainSeconds: (performance.now() - started) / 1000,
            extractMs: meanOf(held.map((x) => caches.prompt.get(x.id)!.ms)),
            note: "",
          });
        }
      }
      for (const candidate of candidates) {
        const train = training.filter((x) => candidate.features(x.id));
        const held = task.heldOut.filter((x) => candidate.features(x.id));
        if (train.length < 20 || held.length === 0 || new Set(train.map((x) => x.truth)).size < classes) {
          rows.push({ name: candidate.name, size, trained: train.length, items: held.length, discrimination: NaN, accuracy: NaN, ece: NaN, logLoss: NaN, brier: NaN, trainSeconds: 0, extractMs: null, note: "features not extracted yet" });
          continue;
        }
        const started = performance.now();
        const head = trainHead(train.map((x) => candidate.features(x.id)!), train.map((x) => x.truth), classes).params;
        const trainSeconds = (performance.now() - started) / 1000;
        const out = held.map((x) => applyHead(head, candidate.features(x.id)!));
        const calibration = "slope" in head.calibration ? `Platt ${head.calibration.slope.toFixed(2)}/${head.calibration.bias.toFixed(2)}` : `T ${head.calibration.temperature.toFixed(2)}`;
        rows.push({
          name: candidate.name,
          size,
          trained: train.length,
          ...measure(task, out, held.map((x) => x.truth)),
          trainSeconds,
          extractMs: meanOf([...train, ...held].map((x) => candidate.extract(x.id)!)),
          note: `lambda ${head.lambda}, ${calibration}${train.length < size ? ` (only ${train.length} of ${size} extracted)` : ""}`,
        });
      }
    }
    print(task, rows);
    const near = nearDuplicates(task);
    console.log(`\nnear-duplicates: ${near.size} of ${task.heldOut.length} held-out items have a training item with word-3-gram Jaccard >= 0.5`);
    if (near.size > 0) {
      // The best candidate at 300 examples again, on the held-out items without a near-duplicate.
      const clean = task.heldOut.filter((x) => !near.has(x.id));
      for (const candidate of candidates.filter((c) => c.name.startsWith("b:") || c.name.startsWith("a:"))) {
        const train = task.training.slice(0, 300).filter((x) => candidate.features(x.id));
        const held = clean.filter((x) => candidate.features(x.id));
        if (train.length < 20 || held.length === 0) continue;
        const head = trainHead(train.map((x) => candidate.features(x.id)!), train.map((x) => x.truth), classes).params;
        const m = measure(task, held.map((x) => applyHead(head, candidate.features(x.id)!)), held.map((x) => x.truth));
        const zero = clean.filter((x) => caches.zeroshot.get(x.id));
        const z = zero.length > 0 ? measure(task, zero.map((x) => caches.zeroshot.get(x.id)!.p), zero.map((x) => x.truth)) : null;
        console.log(
          `  without them (${held.length} items), ${candidate.name} at ${train.length}: ${task.type === "noul" ? "AUROC" : "top-1"} ${m.discrimination.toFixed(3)}, ECE ${m.ece.toFixed(3)}` +
            (z ? `; zero-shot ${z.discrimination.toFixed(3)}` : ""),
        );
      }
    }
  }
}

function print(task: Task, rows: Row[]): void {
  const f = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "-");
  const second = task.type === "noul" ? "AUROC" : "top-1";
  console.log(`\n### ${task.name} (${task.type}, ${task.outcomes.length} outcomes), held-out items as listed\n`);
  console.log(`| candidate | n train | held-out | ${second} | acc | ECE | log loss | Brier | train s | extract ms/item | note |`);
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${r.size === null ? "0" : r.trained < r.size ? `${r.trained}/${r.size}` : r.size} | ${r.items} | ${f(r.discrimination)} | ${f(r.accuracy)} | ${f(r.ece)} | ${f(r.logLoss)} | ${f(r.brier)} | ${f(r.trainSeconds, 1)} | ${r.extractMs === null ? "-" : r.extractMs.toFixed(0)} | ${r.note} |`,
    );
  }
  const zero = rows.find((r) => r.size === null);
  console.log("\ntargets at 300 examples:");
  for (const r of rows.filter((x) => x.size === 300 && Number.isFinite(x.discrimination))) {
    const verdict =
      task.type === "noul"
        ? `AUROC ${f(r.discrimination)} ${r.discrimination >= 0.95 ? "met" : "MISSED"} (>= 0.95), ECE ${f(r.ece)} ${r.ece <= 0.05 ? "met" : "MISSED"} (<= 0.05)${zero ? `; zero-shot AUROC ${f(zero.discrimination)} (${zero.discrimination < 0.85 ? "below" : "not below"} 0.85)` : ""}`
        : zero
          ? `top-1 ${f(r.discrimination)} ${r.discrimination >= 1.5 * zero.discrimination ? "met" : "MISSED"} (>= 1.5 x zero-shot ${f(zero.discrimination)} = ${f(1.5 * zero.discrimination)})`
          : `top-1 ${f(r.discrimination)} (no zero-shot figure yet)`;
    console.log(`  ${r.name.padEnd(40)} ${verdict}`);
  }
}
