/**
 * `npm run build:engine`: builds the engine for this host's GPU, once per engine version
 * and GPU architecture. Run on a GPU host after `npm ci` (docs/deploy.md section 7):
 *
 *     npm run build:engine                 # CUDA, for the GPU nvidia-smi lists first
 *     npm run build:engine -- --arch 90    # for compute capability 9.0, whatever this host has
 *
 * It is node-llama-cpp's own source build (`node-llama-cpp source build`) of the llama.cpp release
 * node-llama-cpp bundles (`llama/gitRelease.bundle`: no download), compiled by the host's CUDA
 * toolkit (nvcc) for the GPU's compute capability alone, flash-attention kernels included, with one
 * change to node-llama-cpp's addon: the runtime's label read in one walk over the logits
 * (engine-patch/label-read.ts; the same numbers; on an H200 the read costs 0.9-1.0 ms over its pass,
 * node-llama-cpp's general path 3.9-4.5). The
 * result is kept in ENGINE_CACHE_DIR (default ~/.cache/decision-service/engine), one folder per
 * node-llama-cpp version, llama.cpp release, platform, architecture and nvcc release, so that the
 * next `npm ci` (which empties node_modules) is followed by a copy of seconds, not another build of
 * minutes (234 s on an H100 host's 16 cores without the flash-attention kernels). The runtime loads
 * it first when it is present (runtime/engine-build.ts): its identity then says
 * `cuda (local build, sm_90)`.
 *
 * Exit codes: 0 built or restored; 1 the build failed; 2 nothing to build for (no NVIDIA GPU, no nvcc).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { CUDA_ARCH_OPTION, enginePath, engineVersion, LABEL_READ_OPTION, localBuilds, localBuildsDir } from "../runtime/engine-build.ts";
import { labelReadPatchId, withPatchedAddon } from "./engine-patch/label-read.ts";

const CLI = enginePath("dist", "cli", "cli.js");
const LLAMA_DIR = enginePath("llama");

function fail(code: number, message: string): never {
  console.error(`build:engine: ${message}`);
  process.exit(code);
}

/** The first GPU's compute capability without its dot ("90" for 9.0), and its name; null without nvidia-smi or a GPU. */
export function detectGpu(): { arch: string; name: string } | null {
  try {
    const line = execFileSync("nvidia-smi", ["--query-gpu=compute_cap,name", "--format=csv,noheader"], { encoding: "utf8" }).split("\n")[0] ?? "";
    const [cap, name] = line.split(",").map((s) => s.trim());
    return cap && /^\d+\.\d+$/.test(cap) ? { arch: cap.replace(".", ""), name: name ?? "" } : null;
  } catch {
    return null;
  }
}

/** nvcc's release ("13.0"), from PATH or the toolkit's usual place; null without one. */
function nvccRelease(): { path: string; release: string } | null {
  for (const nvcc of ["nvcc", "/usr/local/cuda/bin/nvcc"]) {
    try {
      const release = /release (\d+\.\d+)/.exec(execFileSync(nvcc, ["--version"], { encoding: "utf8" }))?.[1];
      if (release) return { path: nvcc, release };
    } catch {
      // not this one
    }
  }
  return null;
}

function main(): void {
  const args = process.argv.slice(2);
  const archArg = args.indexOf("--arch") >= 0 ? args[args.indexOf("--arch") + 1] : undefined;
  if (args.includes("--help")) {
    console.log("usage: npm run build:engine [-- --arch <compute capability without its dot, e.g. 90>]");
    return;
  }
  const gpu = detectGpu();
  const arch = archArg ?? gpu?.arch;
  if (!arch || !/^\d{2,3}[af]?$/.test(arch)) fail(2, archArg ? `--arch ${archArg}: expected a compute capability such as 90` : "no NVIDIA GPU found (nvidia-smi): nothing to build; the runtime serves with the prebuilt builds");
  const nvcc = nvccRelease();
  if (!nvcc) fail(2, "no CUDA toolkit found (nvcc on PATH or in /usr/local/cuda/bin): install the toolkit of the driver's CUDA release");

  const release = (JSON.parse(readFileSync(join(LLAMA_DIR, "binariesGithubRelease.json"), "utf8")) as { release: string }).release;
  const patch = labelReadPatchId();
  const key = `node-llama-cpp-${engineVersion()}-${release}-${process.platform}-${process.arch}-cuda-sm_${arch}-nvcc-${nvcc.release}-label-read-${patch}`;
  const cacheDir = join(process.env.ENGINE_CACHE_DIR || join(homedir(), ".cache", "decision-service", "engine"), key);

  // A local CUDA build for this architecture with this version of the patch.
  const ours = () => localBuilds().find((b) => b.gpu === "cuda" && b.cmakeOptions[CUDA_ARCH_OPTION] === arch && b.cmakeOptions[LABEL_READ_OPTION] === patch);
  const present = ours();
  if (present) {
    removeOtherCudaBuilds(present.folder);
    if (!existsSync(join(cacheDir, "build.json"))) keep(present.folder, cacheDir, { key, folder: present.folder });
    console.log(`build:engine: the local CUDA build for sm_${arch} is in place (${present.folder}; cached in ${cacheDir})`);
    return;
  }
  if (existsSync(join(cacheDir, "build.json"))) {
    const { folder } = JSON.parse(readFileSync(join(cacheDir, "build.json"), "utf8")) as { folder: string };
    copyWhole(join(cacheDir, "build"), join(localBuildsDir(), folder));
    removeOtherCudaBuilds(folder);
    console.log(`build:engine: restored the local CUDA build for sm_${arch} from ${cacheDir}`);
    return;
  }

  console.log(`build:engine: building llama.cpp ${release} (node-llama-cpp ${engineVersion()}) for CUDA sm_${arch}${gpu ? ` (${gpu.name})` : ""} with nvcc ${nvcc.release}; this takes minutes`);
  const started = performance.now();
  const env = {
    ...process.env,
    // node-llama-cpp passes NODE_LLAMA_CPP_CMAKE_OPTION_<name> to CMake, and names the build's folder after them.
    [`NODE_LLAMA_CPP_CMAKE_OPTION_${CUDA_ARCH_OPTION}`]: arch,
    NODE_LLAMA_CPP_CMAKE_OPTION_GGML_CUDA_FA: "ON",
    [`NODE_LLAMA_CPP_CMAKE_OPTION_${LABEL_READ_OPTION}`]: patch,
    ...(nvcc.path.startsWith("/") ? { CUDACXX: nvcc.path } : {}),
  };
  try {
    if (!existsSync(join(LLAMA_DIR, "llama.cpp"))) run(["source", "download", "--skipBuild", "--noUsageExample"], env);
    withPatchedAddon(join(LLAMA_DIR, "addon", "AddonContext.cpp"), () => run(["source", "build", "--gpu", "cuda", "--noUsageExample"], env));
  } catch (error) {
    fail(1, (error as Error).message);
  }
  const built = ours();
  if (!built) fail(1, "node-llama-cpp's build finished, but no local CUDA build for this architecture is in place");
  removeOtherCudaBuilds(built.folder);
  const seconds = Math.round((performance.now() - started) / 1000);

  keep(built.folder, cacheDir, { key, folder: built.folder, seconds, built_at: new Date().toISOString() });
  console.log(`build:engine: built in ${seconds} s (${built.folder}); cached in ${cacheDir}`);
}

/** Copies a local build's binaries (its Release folder and done marker, not the compiler's intermediates) into the cache. */
function keep(folder: string, cacheDir: string, record: Record<string, unknown>): void {
  copyWhole(join(localBuildsDir(), folder), join(cacheDir, "build"), ["Release", "buildDone.status"]);
  // Written last: a cache folder without build.json is one whose copy did not finish.
  writeFileSync(join(cacheDir, "build.json"), `${JSON.stringify(record, null, 2)}\n`);
}

/** `to` becomes a copy of `from` (or of the listed entries of it) whole or not at all: copied beside it, renamed into place. */
function copyWhole(from: string, to: string, entries?: string[]): void {
  const partial = `${to}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  for (const entry of entries ?? readdirSync(from)) cpSync(join(from, entry), join(partial, entry), { recursive: true });
  rmSync(to, { recursive: true, force: true });
  renameSync(partial, to);
}

/**
 * The runtime serves with the first local CUDA build it finds (runtime/engine-build.ts localCudaBuild),
 * so one is left: a build for another architecture or version of the patch is superseded by this one.
 */
function removeOtherCudaBuilds(keepFolder: string): void {
  for (const other of localBuilds()) {
    if (other.gpu === "cuda" && other.folder !== keepFolder) rmSync(join(localBuildsDir(), other.folder), { recursive: true, force: true });
  }
}

/** Runs node-llama-cpp's CLI; throws when it fails (so that a patched source is put back first). */
function run(cliArgs: string[], env: NodeJS.ProcessEnv): void {
  // Under Node, as node-llama-cpp's CLI expects (it runs npm and cmake-js itself).
  const result = spawnSync("node", [CLI, ...cliArgs], { env, stdio: "inherit" });
  if (result.status !== 0) throw new Error(`node-llama-cpp ${cliArgs.slice(0, 2).join(" ")} failed (exit ${result.status ?? result.signal})`);
}

if (import.meta.main) main();
