/**
 * Entry point of a model runtime (runs under Bun on the GPU host, or on a developer machine's CPU):
 *
 *     RUNTIME_MODEL_PATH=model.gguf RUNTIME_SECRET=… RUNTIME_PORT=8090 bun runtime/main.ts
 *
 * Environment:
 *   RUNTIME_MODEL_PATH            GGUF weights (required)
 *   RUNTIME_ADAPTER_PATH          GGUF LoRA adapter served on top of the weights (optional)
 *   RUNTIME_ENCODER_PATH          the sentence encoder's ONNX file (optional; local/text-encoder.ts installs it),
 *                                 its vocabulary beside it as <name>.tokenizer.json: /v1/embed for trained heads
 *   RUNTIME_RELEASE_ID            release id to report (default: derived from the file name and fingerprint)
 *   RUNTIME_SECRET                bearer secret every call must carry (required), or RUNTIME_SECRET_FILE, a
 *                                 file holding it, read again on SIGHUP; `new,old` while rotating (both accepted)
 *   METRICS_SECRET                the operator's scrape secret: GET /metrics answers its bearer (server.ts lists
 *                                 the metrics); or METRICS_SECRET_FILE. Unset: no /metrics
 *   RUNTIME_HOST, RUNTIME_PORT    where to listen (default host 127.0.0.1; port required, 0 picks one)
 *   RUNTIME_MAX_TOKENS_PER_PASS   longest pass evaluated (default LIMITS.tokensPerPass)
 *   RUNTIME_THREADS               CPU threads for evaluation (default 2)
 *   RUNTIME_GPU                   unset or "auto": the first of the local CUDA build (npm run build:engine), the
 *                                 prebuilt CUDA build and the Vulkan build that evaluates a pass in a probe process
 *                                 of its own (gpu-probe.ts), else the CPU build; "false" forces the CPU build;
 *                                 "cuda" (the local build where there is one), "vulkan" or "metal" insist on one (no
 *                                 probe, no fallback). The identity's `engine` says which runs, and why not the others.
 *   RUNTIME_FAKE_PASS_MS          benchmarks only: every pass takes this many milliseconds and evaluates nothing (a
 *                                 stand-in for a GPU, fixed-pass-engine.ts); the identity's `engine` says so
 *   RUNTIME_FAKE_GPU              benchmarks only: "h200", every decode costs what it costs on that GPU (a fixed part, a
 *                                 part per token, a label read) and evaluates nothing (fixed-pass-engine.ts GPU_COSTS);
 *                                 not with RUNTIME_FAKE_PASS_MS
 *   RUNTIME_SEQUENCES             passes one decode of /v1/score-group carries (default: 1 on the CPU build, where a
 *                                 decode's cost is its tokens and every sequence holds a pass's KV cache; 16 on a GPU)
 *   RUNTIME_PROBE_FAKE_ABORT      tests only: a comma list of GPU builds whose probe aborts the probe process
 *                                 (gpu-probe.ts), as a build whose kernels the driver cannot run does
 *   RUNTIME_READOUT               benchmarks only: "distribution", every pass reads the whole probability map
 *                                 (distribution-reader.ts; numbers within about 1e-3 of the default label read, and
 *                                 slower), one pass at a time
 *
 * Once listening it prints one line to stdout, for whoever started it:
 *
 *     RUNTIME READY {"port":8090,"release_id":"local-…","fingerprint":"…"}
 */
import { z } from "zod";
import { LIMITS } from "../contract/limits.ts";
import { SecretSource } from "../server-shared/secrets.ts";
import { integer, optional, parseSettings, required } from "../server-shared/settings.ts";
import { Identity, RENDERING_VERSION } from "../server-shared/runtime-protocol.ts";
import { cachedSha256 } from "../server-shared/digest.ts";
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { readDistribution } from "./distribution-reader.ts";
import { Engine, type EngineOptions } from "./engine.ts";
import { localCudaBuild, type EngineBuild } from "./engine-build.ts";
import { FixedPassEngine, GPU_COSTS } from "./fixed-pass-engine.ts";
import { chooseBuild, probeBuild, probeChild, type Probe } from "./gpu-probe.ts";
import type { SentenceEncoder } from "./text-encoder.ts";
import { defaultReleaseId, fingerprintOf } from "./fingerprint.ts";
import { serveRuntime } from "./serve.ts";
import { createRuntimeApp } from "./server.ts";

const RuntimeSettings = z.object({
  RUNTIME_MODEL_PATH: required(),
  RUNTIME_ADAPTER_PATH: optional(),
  RUNTIME_ENCODER_PATH: optional(),
  RUNTIME_RELEASE_ID: optional(),
  // Checked (with RUNTIME_SECRET_FILE) by server-shared/secrets.ts at start.
  RUNTIME_SECRET: optional(),
  RUNTIME_HOST: optional().transform((host) => host ?? "127.0.0.1"),
  RUNTIME_PORT: integer(0, 65535),
  RUNTIME_MAX_TOKENS_PER_PASS: integer(2, 1 << 20, LIMITS.tokensPerPass),
  RUNTIME_THREADS: integer(1, 1024, 2),
  RUNTIME_SEQUENCES: z.preprocess((v) => (v === "" ? undefined : v), z.coerce.number().int().min(1).max(64).optional()),
  RUNTIME_FAKE_PASS_MS: z.preprocess((v) => (v === "" ? undefined : v), z.coerce.number().int().min(1).max(1000).optional()),
  RUNTIME_FAKE_GPU: z.preprocess((v) => (v === "" ? undefined : v), z.enum(Object.keys(GPU_COSTS) as [keyof typeof GPU_COSTS], { error: `must be ${Object.keys(GPU_COSTS).join(" or ")}` }).optional()),
  RUNTIME_READOUT: z.preprocess((v) => (v === "" ? undefined : v), z.enum(["labels", "distribution"]).default("labels")),
  RUNTIME_PROBE_FAKE_ABORT: optional(),
  RUNTIME_GPU: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z.enum(["false", "auto", "cuda", "vulkan", "metal"], { error: 'must be "false", "auto", "cuda", "vulkan" or "metal"' }).default("auto"),
  ),
});

async function main(): Promise<void> {
  let settings: z.infer<typeof RuntimeSettings>;
  const secrets = new SecretSource(process.env);
  try {
    settings = parseSettings("runtime", RuntimeSettings, process.env);
    if (!secrets.list("RUNTIME_SECRET")) throw new Error("runtime: setting RUNTIME_SECRET (or RUNTIME_SECRET_FILE) is required");
    if (settings.RUNTIME_FAKE_PASS_MS && settings.RUNTIME_FAKE_GPU) throw new Error("runtime: RUNTIME_FAKE_PASS_MS and RUNTIME_FAKE_GPU are two stand-ins; set one");
  } catch (err) {
    console.error(`${(err as Error).message.replace(/^(?!runtime: )/, "runtime: ")}; refusing to start`);
    process.exit(2);
  }
  const engineOptions: EngineOptions = {
    modelPath: settings.RUNTIME_MODEL_PATH,
    adapterPath: settings.RUNTIME_ADAPTER_PATH ?? null,
    maxTokensPerPass: settings.RUNTIME_MAX_TOKENS_PER_PASS,
    threads: settings.RUNTIME_THREADS,
    build: insisted(settings.RUNTIME_GPU),
    // A benchmark's baseline: every pass reads the whole distribution (distribution-reader.ts).
    ...(settings.RUNTIME_READOUT === "distribution" ? { reader: readDistribution } : {}),
  };
  const { modelPath, adapterPath } = engineOptions;

  const fingerprint = fingerprintOf({
    weightsSha256: await cachedSha256(modelPath),
    adapterSha256: adapterPath ? await cachedSha256(adapterPath) : null,
    renderingVersion: RENDERING_VERSION,
  });

  // "auto": each GPU build proven by a pass in a child process first (gpu-probe.ts), so that a build
  // that aborts the process takes down a probe, never the runtime.
  const probing = { modelPath, threads: engineOptions.threads, ...(settings.RUNTIME_PROBE_FAKE_ABORT ? { probe: abortingProbe(settings.RUNTIME_PROBE_FAKE_ABORT.split(","), modelPath, engineOptions.threads) } : {}) };
  const choice = settings.RUNTIME_GPU === "auto" ? await chooseBuild(probing, (line) => console.error(line)) : null;
  const started = performance.now();
  const build = choice ? choice.build : engineOptions.build;
  const loaded = await Engine.load({ ...engineOptions, build, sequences: settings.RUNTIME_SEQUENCES ?? (build === "cpu" ? 1 : 16) });
  const engine = settings.RUNTIME_FAKE_PASS_MS
    ? new FixedPassEngine(loaded, { kind: "pass", passMs: settings.RUNTIME_FAKE_PASS_MS })
    : settings.RUNTIME_FAKE_GPU
      ? new FixedPassEngine(loaded, { kind: "decode", name: settings.RUNTIME_FAKE_GPU, ...GPU_COSTS[settings.RUNTIME_FAKE_GPU] })
      : loaded;
  console.error(`runtime: loaded ${modelPath}${adapterPath ? ` with adapter ${adapterPath}` : ""} in ${Math.round(performance.now() - started)} ms`);

  const encoder = settings.RUNTIME_ENCODER_PATH ? await loadEncoder(settings.RUNTIME_ENCODER_PATH, settings.RUNTIME_THREADS) : null;
  const identity = Identity.parse({
    release_id: settings.RUNTIME_RELEASE_ID ?? defaultReleaseId(modelPath, fingerprint),
    fingerprint,
    rendering_version: RENDERING_VERSION,
    modalities: ["text"],
    max_tokens_per_pass: engine.maxTokensPerPass,
    sequences: engine.sequences,
    engine: choice && choice.tried.length > 0 ? `${engine.description}, after ${choice.tried.map((t) => `${t.build}: ${t.why}`).join("; ")}` : engine.description,
    ...(encoder ? { encoder: encoder.identity } : {}),
  });
  const app = createRuntimeApp(engine, identity, () => secrets.list("RUNTIME_SECRET")!.accepted, encoder?.encoder, () => secrets.list("METRICS_SECRET")?.accepted);
  serveRuntime({ label: "runtime", hostname: settings.RUNTIME_HOST, port: settings.RUNTIME_PORT, fetch: app.fetch, identity, secrets, dispose: () => engine.dispose() });
}

/**
 * A test's fault (RUNTIME_PROBE_FAKE_ABORT): the probe of each listed build is a child that aborts,
 * as the prebuilt CUDA build did on an H100 whose driver could not compile its code; no build here
 * aborts. The other builds are probed as ever.
 */
function abortingProbe(builds: string[], modelPath: string, threads: number): Probe {
  const aborts = `console.error("fake abort (RUNTIME_PROBE_FAKE_ABORT, a test's fault)"); process.abort();`;
  return (build) => (builds.includes(build) ? probeChild(["-e", aborts]) : probeBuild(build, { modelPath, threads }));
}

/** The build a RUNTIME_GPU other than "auto" insists on ("auto" is decided by probes, in main). */
function insisted(gpu: "false" | "auto" | "cuda" | "vulkan" | "metal"): EngineBuild {
  if (gpu === "false" || gpu === "auto") return "cpu";
  if (gpu === "cuda") return localCudaBuild() ? "cuda-local" : "cuda";
  return gpu;
}

/** The sentence encoder at `modelPath` and its identity: its fingerprint hashes the ONNX file's and the vocabulary's SHA-256. */
async function loadEncoder(modelPath: string, threads: number): Promise<{ encoder: SentenceEncoder; identity: NonNullable<Identity["encoder"]> }> {
  // Imported only here: ONNX Runtime is loaded by runtimes that serve the encoder, no other.
  const { encoderTokenizerPath, SentenceEncoder } = await import("./text-encoder.ts");
  const tokenizerPath = encoderTokenizerPath(modelPath);
  const encoder = await SentenceEncoder.load({ modelPath, tokenizerPath, threads });
  const digest = createHash("sha256").update(`${await cachedSha256(modelPath)}:${await cachedSha256(tokenizerPath)}`).digest("hex");
  console.error(`runtime: loaded the sentence encoder ${modelPath} (${encoder.width} numbers)`);
  return { encoder, identity: { name: basename(modelPath).replace(/\.onnx$/, ""), fingerprint: digest, width: encoder.width } };
}

main().catch((err: unknown) => {
  console.error(`runtime: failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
