/**
 * Which engine build a runtime with `RUNTIME_GPU=auto` serves with, with no crash loop, ever.
 * A GPU build can load and then abort the whole process at its first pass (node-llama-cpp 3.22.1's
 * prebuilt CUDA build on an H100 with a CUDA 13.0 driver: its sm_90 code is PTX the driver cannot
 * compile), which no try/catch survives. So each GPU build is proven first in a child process of its
 * own that loads the model and evaluates a real pass; the first whose child succeeds is the one the
 * runtime loads. The order (engine-build.ts GPU_BUILDS): the local CUDA build (`npm run build:engine`),
 * the prebuilt CUDA build, the prebuilt Vulkan build, then the CPU build, which needs no proof (it is
 * the last resort, and the runtime's own warm-up pass is its proof).
 *
 *     const { build, tried } = await chooseBuild({ modelPath, threads: 2 }, log);
 *     // build: "cuda-local" | "cuda" | "vulkan" | "cpu"; tried: why each build before it was passed over
 *
 * The child is this file run as a script: `bun runtime/gpu-probe.ts <build>` with RUNTIME_MODEL_PATH
 * and RUNTIME_THREADS. It exits 0 after one pass, 3 when the build or a device for it is not here.
 * A test gives chooseBuild a `probe` of its own (runtime/main.ts RUNTIME_PROBE_FAKE_ABORT: a child
 * that aborts as that H100's CUDA build did, since no build here aborts).
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { GPU_BUILDS, loadLlama, type EngineBuild, type GpuBuild } from "./engine-build.ts";

/** How long a probe may take: loading the model on the device and one pass. */
export const PROBE_TIMEOUT_MS = 120_000;
/** A probe's exit code when its build, or a device for it, is not on this host. */
const NOT_HERE = 3;

export interface BuildChoice {
  build: GpuBuild | "cpu";
  /** Each build passed over before the chosen one, and why, in order. */
  tried: { build: GpuBuild; why: string }[];
}

/** Probes a build: null when it evaluated a pass in a child process of its own; otherwise why not. */
export type Probe = (build: GpuBuild) => Promise<string | null>;

export async function chooseBuild(options: { modelPath: string; threads: number; probe?: Probe }, log: (line: string) => void): Promise<BuildChoice> {
  const tried: BuildChoice["tried"] = [];
  const probe = options.probe ?? ((build: GpuBuild) => probeBuild(build, options));
  for (const build of GPU_BUILDS) {
    const why = await probe(build);
    if (why === null) {
      log(`runtime: the ${build} build evaluated its probe pass; serving with it`);
      return { build, tried };
    }
    log(`runtime: not the ${build} build: ${why}`);
    tried.push({ build, why });
  }
  log("runtime: serving with the CPU build");
  return { build: "cpu", tried };
}

/** null when `build` evaluated a pass in a child process (this file run as a script); otherwise why not. */
export function probeBuild(build: GpuBuild, options: { modelPath: string; threads: number }): Promise<string | null> {
  return probeChild([fileURLToPath(import.meta.url), build], { RUNTIME_MODEL_PATH: options.modelPath, RUNTIME_THREADS: String(options.threads) });
}

/** Runs a probe child (`bun <args>`) and reads its end: null for exit 0, otherwise why it failed. */
export function probeChild(args: string[], env: Record<string, string> = {}): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString("utf8")).slice(-2000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), PROBE_TIMEOUT_MS);
    child.on("error", (err) => {
      clearTimeout(timer);
      resolve(`its probe could not start: ${err.message}`);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const last = stderr.trim().split("\n").at(-1) ?? "";
      if (code === 0) resolve(null);
      else if (code === NOT_HERE) resolve(last || "not available on this host");
      else if (signal === "SIGKILL") resolve(`its probe pass did not finish within ${PROBE_TIMEOUT_MS / 1000} s`);
      else resolve(`its probe pass ${signal ? `was killed by ${signal}` : `exited with ${code}`}${last ? `: ${last.slice(0, 300)}` : ""}`);
    });
  });
}

/** The child: load the model with `build` and evaluate one short pass. */
async function probeMain(build: EngineBuild): Promise<void> {
  const llama = await loadLlama(build).catch((err: unknown) => {
    console.error(`no ${build} build or device here (${err instanceof Error ? err.message.split("\n")[0] : String(err)})`);
    process.exit(NOT_HERE);
  });
  const model = await llama.loadModel({ modelPath: process.env.RUNTIME_MODEL_PATH! });
  const context = await model.createContext({ contextSize: 256, threads: Number(process.env.RUNTIME_THREADS) || 2 });
  const tokens = model.tokenize("Is this a probe? Yes");
  // A pass whose logits are read: where a build's kernels fail, they fail here.
  await context.getSequence().controlledEvaluate([...tokens.slice(0, -1), [tokens.at(-1)!, { generateNext: { probabilities: true } }]]);
  process.exit(0);
}

if (import.meta.main) {
  probeMain(process.argv[2] as EngineBuild).catch((err: unknown) => {
    console.error(`the probe failed: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
