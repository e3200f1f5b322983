/**
 * `npm run bench:decisions`: real-time decision latency through edge and sidecar against the same
 * passes called directly on the runtime (the baseline), measured in one run on an isolated stack with
 * the default model, the two paths interleaved (A, B, B, A, ...); where the added time goes, hop by
 * hop, from the Server-Timing the edge and the sidecar record; then the passes and time of a
 * 255-option choice, and the sidecar's resident memory. Requests go one at a time: the GPU lane is
 * serial, so concurrency would only measure queueing. Settings: RUNS (per path, default 30).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DecisionResponse } from "../contract/decision.ts";
import { CreatedKey } from "../contract/keys.ts";
import { asText, plannedPasses, planQuestion, SERVED_RENDERING } from "../sidecar/decide/render.ts";
import { RUNTIME_PATHS, TokenizeResponse } from "../server-shared/runtime-protocol.ts";
import { startStack } from "../local/stack.ts";
import { SERVER_TIMING_HEADER, Timings } from "../server-shared/timing.ts";
import { getUserAccessToken } from "../local/user-token.ts";

const runs = Number(process.env.RUNS ?? 30);

/** What each Server-Timing entry times. */
const HOPS: Record<string, string> = {
  key: "edge: the key and account query (Postgres)",
  quota: "edge: quota admission (Redis)",
  model: "edge: model resolution (Postgres)",
  sidecar: "edge: the whole sidecar call",
  registry: "sidecar: release lookup (Postgres)",
  identity: "sidecar: runtime identity call",
  queue: "sidecar: wait for the GPU lane",
  tokenize: "sidecar: tokenize calls (summed; they run in parallel)",
  score: "sidecar: runtime passes",
};
const dataDir = mkdtempSync(join(tmpdir(), "svc-bench-"));
chmodSync(dataDir, 0o711);
const stack = await startStack({ dataDir, log: () => {} });

function percentiles(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

async function timed(n: number, run: () => Promise<void>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await run();
    samples.push(performance.now() - t0);
  }
  return samples;
}

try {
  const token = await getUserAccessToken({ issuer: stack.idp.issuer, login: "bench" });
  const keyRes = await fetch(`${stack.baseUrl}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench" }),
  });
  const key = CreatedKey.parse(await keyRes.json()).secret;

  const request = {
    model: "svc-shared",
    state: { ticket: "The invoice was charged twice this month.", customer: "ACME" },
    questions: { urgent: { type: "noul" as const, instructions: "Does the customer report a problem with money?" } },
  };
  const hops: Map<string, number>[] = [];
  const decide = async (body: unknown) => {
    const res = await fetch(`${stack.baseUrl}/v1/systemone`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (res.status !== 200) throw new Error(`decision answered ${res.status}: ${await res.text()}`);
    hops.push(Timings.parse(res.headers.get(SERVER_TIMING_HEADER)));
    return DecisionResponse.parse(await res.json());
  };

  // The same passes (the content and the content-free one), rendered as the sidecar renders them, sent straight to the runtime.
  const runtimeHeaders = { authorization: `Bearer ${stack.secrets.runtime}`, "content-type": "application/json" };
  const plan = planQuestion(SERVED_RENDERING, asText(request.state), request.questions.urgent, { words: false, contextual: true });
  const passes = plannedPasses(plan);
  const labelTokens = await Promise.all(
    passes[0]!.labels.flat().map(async (form) => {
      const res = await fetch(`${stack.urls.runtime}${RUNTIME_PATHS.tokenize}`, { method: "POST", headers: runtimeHeaders, body: JSON.stringify({ text: form }) });
      return TokenizeResponse.parse(await res.json()).tokens[0]!;
    }),
  );
  const direct = async () => {
    for (const pass of passes) {
      const res = await fetch(`${stack.urls.runtime}${RUNTIME_PATHS.score}`, {
        method: "POST",
        headers: runtimeHeaders,
        body: JSON.stringify({ segments: pass.segments, label_tokens: labelTokens }),
      });
      if (res.status !== 200) throw new Error(`runtime answered ${res.status}`);
      await res.arrayBuffer();
    }
  };

  await decide(request);
  await direct();
  hops.length = 0;
  // Interleaved, alternating which path goes first, so that drift (heat, caches) falls on both alike.
  const e2eSamples: number[] = [];
  const directSamples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const pair = [() => timed(1, async () => void (await decide(request))), () => timed(1, direct)] as const;
    const [first, second] = i % 2 === 0 ? [0, 1] : [1, 0];
    const a = await pair[first]!();
    const b = await pair[second]!();
    (first === 0 ? e2eSamples : directSamples).push(...a);
    (first === 0 ? directSamples : e2eSamples).push(...b);
  }
  const endToEnd = percentiles(e2eSamples);
  const baseline = percentiles(directSamples);
  const hopNames = [...new Set(hops.flatMap((h) => [...h.keys()]))];
  const medianOf = (name: string) => percentiles(hops.map((h) => h.get(name) ?? 0)).p50;

  const criteria = Object.fromEntries(Array.from({ length: 255 }, (_, i) => [`option-${i}`, i % 3 === 0 ? null : `description ${i}`]));
  const t0 = performance.now();
  const big = await decide({ model: "svc-shared", state: "Pick the option that best fits a billing question.", questions: { big: { type: "choice", criteria } } });
  const bigMs = performance.now() - t0;

  const sidecarPid = stack.children.find((child) => child.name === "sidecar")!.proc.pid!;
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${sidecarPid}/status`, "utf8"))?.[1];

  console.log(`one noul question, ${runs} sequential runs per path, loopback, CPU runtime, ${new Date().toISOString()}`);
  console.log(`${"path".padEnd(40)} ${"p50 ms".padStart(9)} ${"p99 ms".padStart(9)}`);
  console.log(`${"runtime /v1/score directly (baseline)".padEnd(40)} ${baseline.p50.toFixed(1).padStart(9)} ${baseline.p99.toFixed(1).padStart(9)}`);
  console.log(`${"edge + sidecar + runtime".padEnd(40)} ${endToEnd.p50.toFixed(1).padStart(9)} ${endToEnd.p99.toFixed(1).padStart(9)}`);
  console.log(`${"ratio".padEnd(40)} ${(endToEnd.p50 / baseline.p50).toFixed(2).padStart(9)} ${(endToEnd.p99 / baseline.p99).toFixed(2).padStart(9)}`);
  console.log(`added at p50: ${(endToEnd.p50 - baseline.p50).toFixed(1)} ms; at p99: ${(endToEnd.p99 - baseline.p99).toFixed(1)} ms`);
  console.log("\nwhere the time goes (median of each hop's Server-Timing over the end-to-end runs, ms):");
  for (const name of hopNames) console.log(`  ${name.padEnd(10)} ${medianOf(name).toFixed(2).padStart(8)}  ${HOPS[name] ?? ""}`);
  const inside = ["registry", "identity", "queue", "tokenize", "score"].reduce((sum, name) => sum + medianOf(name), 0);
  console.log(`  ${"(edge, outside its timed hops)".padEnd(10)} ${(endToEnd.p50 - medianOf("key") - medianOf("quota") - medianOf("model") - medianOf("sidecar")).toFixed(2).padStart(8)}  wrangler dev, workerd, body parsing, the client's own loopback`);
  console.log(`  ${"(sidecar, outside its timed hops)".padEnd(10)} ${(medianOf("sidecar") - inside).toFixed(2).padStart(8)}  the edge->sidecar hop, body parsing, admission and readout`);
  console.log(`\n255-option choice: ${big.usage.output_tokens} passes, ${big.usage.input_tokens} input tokens, ${(bigMs / 1000).toFixed(2)} s end to end`);
  console.log(`sidecar resident memory after the runs: ${rss ? (Number(rss) / 1024).toFixed(1) : "?"} MiB`);
} finally {
  await stack.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
