/**
 * `npm run bench:threads`: why a CPU runtime must not share its cores. The default model's engine
 * evaluates the same pass with RUNTIME_THREADS threads (default 2) on an idle machine and while
 * another process keeps one core busy, the two conditions interleaved in rounds; it prints the p50
 * and max of each and their ratio. llama.cpp's evaluation threads wait for each other at every
 * layer, so one of them descheduled stalls the pass: on a 2-core machine this is where multi-second
 * real-time outliers come from when the whole local stack shares the cores (bench:bulk). On a GPU
 * host the evaluation is on the GPU and the CPU threads matter little.
 */
import { spawn } from "node:child_process";
import { ensureModel } from "../local/model.ts";
import { Engine } from "../runtime/engine.ts";

const threads = Number(process.env.RUNTIME_THREADS ?? 2);
const rounds = Number(process.env.ROUNDS ?? 4);
const perRound = 5;

const engine = await Engine.load({ modelPath: (await ensureModel()).path, adapterPath: null, maxTokensPerPass: 4096, threads, build: "cpu" });
const text = `State:\n${"The customer writes that the app crashes on start and asks for a refund of the double charge. ".repeat(8)}\nQuestion: Does the customer ask for money back?\nAnswer:`;
const label = engine.tokenize(" Yes", false).tokens[0]!;
const tokens = engine.tokenize(text, false).tokens.length;
const passes = async (n: number, into: number[]) => {
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await engine.score([{ text, special: false }], [label]);
    into.push(performance.now() - started);
  }
};
const summary = (samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: sorted[Math.floor(sorted.length / 2)]!, max: sorted.at(-1)! };
};

await passes(3, []);
const idle: number[] = [];
const contended: number[] = [];
for (let round = 0; round < rounds; round++) {
  await passes(perRound, idle);
  const busy = spawn("sh", ["-c", "while :; do :; done"], { stdio: "ignore" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  try {
    await passes(perRound, contended);
  } finally {
    busy.kill("SIGKILL");
  }
}
await engine.dispose();

const a = summary(idle);
const b = summary(contended);
console.log(`one pass of ${tokens} tokens, default model on CPU, RUNTIME_THREADS=${threads}, ${rounds * perRound} passes per condition`);
console.log(`idle machine                 p50 ${a.p50.toFixed(0).padStart(6)} ms   max ${a.max.toFixed(0).padStart(6)} ms`);
console.log(`one core busy elsewhere      p50 ${b.p50.toFixed(0).padStart(6)} ms   max ${b.max.toFixed(0).padStart(6)} ms`);
console.log(`ratio busy / idle: p50 ${(b.p50 / a.p50).toFixed(2)}, max ${(b.max / a.max).toFixed(2)}`);
