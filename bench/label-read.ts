/**
 * `npm run bench:label-read` (issue 37): what a short pass and the reading of its labels cost inside
 * the engine, in process, on one llama.cpp build (ENGINE_BUILD: cuda-local, cuda, vulkan or cpu;
 * default cpu). A short pass (REST tokens, default 8) over a kept prefix (41 tokens) is evaluated RUNS
 * times (default 200) in each of four ways, interleaved:
 *
 *   - floor: the runtime's pass with no output position (llama.cpp computes no logits at all);
 *   - label read: the runtime's pass and read (runtime/llama-sequence.ts: node-llama-cpp's addon
 *     called directly), which a build from `npm run build:engine` answers in one walk over the logits
 *     (ops/engine-patch/label-read.inc);
 *   - through node-llama-cpp: the same pass and read through node-llama-cpp's `controlledEvaluate`
 *     (its batch queue, locks, thread reservation and a sampler made for each evaluation), as the
 *     runtime evaluated before it called the addon directly: what calling it directly saves;
 *   - general path: that, with `includeMin` added to the request, which adds nothing here but which
 *     the patched build leaves to node-llama-cpp's general path (copy, sample, filter, weigh): what
 *     every build without the patch does.
 *
 * The runtime's path and node-llama-cpp's run in two contexts of the same model made alike (the
 * runtime's own object and node-llama-cpp's cannot share a sequence).
 *
 * Then a decision on a state never seen before, as bench:shared-work (b) makes: the sequence cleared,
 * the state evaluated (no output), then the question evaluated and read, each step's median, on the
 * runtime's path (right after the first part, so on a GPU warmed up by it: its first passes of new
 * shapes are slower).
 *
 * It prints each one's median and p90 in ms, the ratios, and the largest difference between the
 * three reads' label logits and normalisers, which is 0 (the same llama.cpp calls; the patch computes
 * the same float sums in the same order; it exits 1 otherwise). On a build without the patch the
 * general path and node-llama-cpp's read cost the same.
 *
 *     npm run bench:label-read                              # the CPU build (about a minute on 2 cores)
 *     ENGINE_BUILD=cuda-local npm run bench:label-read      # a GPU host after npm run build:engine
 *
 * Figures: see docs/deploy.md section 7 (GPU hosts) and the closing notes of issue 37.
 */
import type { ControlledEvaluateInputItem, Token } from "node-llama-cpp";
import { ensureModel } from "../local/model.ts";
import { describeBuild, loadLlama, type EngineBuild } from "../runtime/engine-build.ts";
import { labelReadRequest, LlamaSequence } from "../runtime/llama-sequence.ts";

const build = (process.env.ENGINE_BUILD ?? "cpu") as EngineBuild;
const runs = Number(process.env.RUNS ?? 200);
const restLength = Number(process.env.REST ?? 8);

const llama = await loadLlama(build);
const model = await llama.loadModel({ modelPath: (await ensureModel()).path });
// As the runtime makes its context (runtime/engine.ts), twice: one for each path.
const contextOptions = { contextSize: 4096, sequences: 1, threads: Number(process.env.RUNTIME_THREADS ?? 2), swaFullCache: true };
const theirContext = await model.createContext(contextOptions);
const ourContext = await model.createContext(contextOptions);
const sequence = theirContext.getSequence();
const ours = LlamaSequence.of(ourContext, model);
const devices = llama.gpu ? await llama.getGpuDeviceNames() : [];
console.log(`label read: ${describeBuild(llama)}${devices.length ? ` on ${devices.join(", ")}` : ""}; ${runs} runs of each, ${restLength}-token passes`);

const prefix = [model.tokens.bos!, ...model.tokenize("State:\nThe customer was charged twice for the March invoice and asks for the second charge to be refunded to the card it came from. The order number is 48213.\n\n")];
const QUESTION = " Question: is this a billing problem? Answer yes or no.\nAnswer:";
const question = model.tokenize(QUESTION);
const rest = question.slice(-restLength);
const labels = [model.tokenize(" yes")[0]!, model.tokenize(" no")[0]!];
await sequence.controlledEvaluate(prefix);
await ours.evaluate(prefix, null);

type Way = "floor" | "label read" | "through node-llama-cpp" | "general path";
const read = labelReadRequest(labels);
// The lowest logit is returned only when it is already among the returned ones (node-llama-cpp 3.22.1's
// addon), so this asks for the same numbers; the patch leaves any request but its own to the general path.
const general = { ...read, logits: { filter: { ...read.logits.filter, includeMin: true } } };
type Pass = { ms: number; logits?: Map<Token, number>; weight?: number };

/** One pass of `rest` after the kept prefix, read `way`; its wall time and what it read. */
async function pass(way: Way): Promise<Pass> {
  if (way === "floor" || way === "label read") {
    ours.eraseFrom(prefix.length);
    const started = performance.now();
    const result = await ours.evaluate(rest, way === "floor" ? null : { kind: "labels", labels });
    const ms = performance.now() - started;
    return result?.kind === "labels" ? { ms, logits: result.logits, weight: result.totalLogitWeight } : { ms };
  }
  await sequence.eraseContextTokenRanges([{ start: prefix.length, end: sequence.nextTokenIndex }]);
  const generateNext = way === "general path" ? general : read;
  const input = rest.map((token, i): ControlledEvaluateInputItem => (i === rest.length - 1 ? [token, { generateNext }] : token));
  const started = performance.now();
  const next = (await sequence.controlledEvaluate(input))[rest.length - 1]?.next;
  return { ms: performance.now() - started, logits: next?.logits, weight: next?.totalLogitWeight };
}

const WAYS: Way[] = ["floor", "label read", "through node-llama-cpp", "general path"];
for (let i = 0; i < 10; i++) for (const way of WAYS) await pass(way);
const times: Record<Way, number[]> = { floor: [], "label read": [], "through node-llama-cpp": [], "general path": [] };
let largest = 0;
for (let i = 0; i < runs; i++) {
  const reads: Partial<Record<Way, Pass>> = {};
  // Each run in another order, so that no way always follows another.
  const order = WAYS.map((_, k) => WAYS[(k + i) % WAYS.length]!);
  for (const way of i % 2 === 0 ? order : order.reverse()) {
    reads[way] = await pass(way);
    times[way].push(reads[way].ms);
  }
  const a = reads["label read"]!;
  for (const b of [reads["through node-llama-cpp"]!, reads["general path"]!]) {
    if (a.weight === undefined || b.weight === undefined || !a.logits || !b.logits) throw new Error("a read returned no weight or logits");
    largest = Math.max(largest, Math.abs(a.weight - b.weight), ...labels.map((t) => Math.abs(a.logits!.get(t)! - b.logits!.get(t)!)));
  }
}

const quantile = (xs: number[], q: number) => [...xs].sort((x, y) => x - y)[Math.floor(q * (xs.length - 1))]!;
const median = (way: Way) => quantile(times[way], 0.5);
for (const way of WAYS) console.log(`  ${way.padEnd(22)} p50 ${median(way).toFixed(3).padStart(8)} ms   p90 ${quantile(times[way], 0.9).toFixed(3).padStart(8)} ms`);
const ratio = (a: Way, b: Way) => `${(median(a) / median(b)).toFixed(2)}x`;
console.log(`  the runtime's pass against the same through node-llama-cpp: ${median("label read").toFixed(3)} ms against ${median("through node-llama-cpp").toFixed(3)} (${ratio("through node-llama-cpp", "label read")})`);
const own = median("through node-llama-cpp") - median("floor");
const before = median("general path") - median("floor");
console.log(`  the read through node-llama-cpp over the floor: patched request ${own.toFixed(3)} ms, general path ${before.toFixed(3)} ms: ${(before / Math.max(own, 1e-3)).toFixed(1)}x`);
console.log(`  largest difference between the three reads' numbers: ${largest}`);
// A decision on a state never seen before (bench:shared-work (b)): the sequence cleared, the new
// state evaluated with no output, then the whole question evaluated and read, each step timed.
const steps = { clear: [] as number[], state: [] as number[], "question and read": [] as number[] };
let stateTokens = 0;
for (let i = 0; i < Math.min(runs, 100); i++) {
  const state = [model.tokens.bos!, ...model.tokenize(`State:\nTicket ${i}: the customer writes that order ${48213 + i} arrived late and asks whether the delivery fee of ${i % 9} euros is refunded.\n\n`)];
  stateTokens = state.length;
  let started = performance.now();
  ours.eraseFrom(0);
  steps.clear.push(performance.now() - started);
  started = performance.now();
  await ours.evaluate(state, null);
  steps.state.push(performance.now() - started);
  started = performance.now();
  await ours.evaluate(question, { kind: "labels", labels });
  steps["question and read"].push(performance.now() - started);
}
console.log(`  a new state each time (about ${stateTokens} tokens, then the question's ${question.length} tokens read), ${steps.clear.length} runs, p50:`);
console.log(`    ${Object.entries(steps).map(([step, xs]) => `${step} ${quantile(xs, 0.5).toFixed(3)} ms`).join(", ")}`);
ours.dispose();
await ourContext.dispose();
await theirContext.dispose();
await model.dispose();
await llama.dispose();
if (largest !== 0) process.exit(1);
