/**
 * Which llama.cpp build a runtime loads. node-llama-cpp brings prebuilt binaries (CPU,
 * CUDA, Vulkan); on a GPU host `npm run build:engine` (ops/engine-build.ts) adds a **local build**:
 * node-llama-cpp's own source build of its bundled llama.cpp release, compiled with the host's CUDA
 * toolkit for the host's GPU alone (7 to 15 times faster a short pass on an H100 than the prebuilt
 * builds: docs/deploy.md section 7). It lives where node-llama-cpp keeps local builds
 * (`node_modules/node-llama-cpp/llama/localBuilds/<folder>`), its folder named after its CMake
 * options, so it is found only by asking for those options: that is what keeps "the local CUDA build"
 * and "the prebuilt CUDA build" two builds a runtime can choose between.
 *
 *     const llama = await loadLlama("cuda-local");   // throws when none is built on this host
 *     describeBuild(llama);                          // "cuda (local build, sm_90)"
 *
 * The builds, in the order RUNTIME_GPU=auto proves them (runtime/gpu-probe.ts): the local CUDA build,
 * the prebuilt CUDA build, the prebuilt Vulkan build; then the CPU build.
 */
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, type Llama } from "node-llama-cpp";

/** The GPU builds `RUNTIME_GPU=auto` tries, in order, before the CPU build. */
export const GPU_BUILDS = ["cuda-local", "cuda", "vulkan"] as const;
export type GpuBuild = (typeof GPU_BUILDS)[number];
/** A build a runtime can be told to load: a GPU build, Metal (Apple machines), or the CPU build. */
export type EngineBuild = GpuBuild | "metal" | "cpu";

/** The CMake option that names the GPU architectures a CUDA build carries code for. */
export const CUDA_ARCH_OPTION = "CMAKE_CUDA_ARCHITECTURES";
/**
 * The CMake option (ignored by CMake) in which `npm run build:engine` records the id of its patch to
 * node-llama-cpp's addon: the label read in one walk over the logits (ops/engine-patch/label-read.ts).
 */
export const LABEL_READ_OPTION = "DECISION_SERVICE_LABEL_READ";

/** A path inside the installed node-llama-cpp package (its entry point is `dist/index.js`). */
export function enginePath(...parts: string[]): string {
  return join(fileURLToPath(new URL("..", import.meta.resolve("node-llama-cpp"))), ...parts);
}

/** Where node-llama-cpp keeps the builds compiled on this host. */
export function localBuildsDir(): string {
  return enginePath("llama", "localBuilds");
}

/** The version of node-llama-cpp installed (the engine's version). */
export function engineVersion(): string {
  return (JSON.parse(readFileSync(enginePath("package.json"), "utf8")) as { version: string }).version;
}

export interface LocalBuild {
  /** The folder under localBuildsDir(). */
  folder: string;
  gpu: string;
  /** The CMake options it was built with (node-llama-cpp finds the build again by these). */
  cmakeOptions: Record<string, string>;
}

/** The finished local builds on this host, from the metadata node-llama-cpp writes beside each binary. */
export function localBuilds(dir = localBuildsDir()): LocalBuild[] {
  if (!existsSync(dir)) return [];
  const builds: LocalBuild[] = [];
  for (const folder of readdirSync(dir).sort()) {
    const metadataPath = join(dir, folder, "Release", "_nlcBuildMetadata.json");
    if (!existsSync(metadataPath) || !existsSync(join(dir, folder, "buildDone.status"))) continue;
    try {
      const { buildOptions } = JSON.parse(readFileSync(metadataPath, "utf8")) as { buildOptions: { gpu: string | false; customCmakeOptions?: Record<string, string> } };
      builds.push({ folder, gpu: buildOptions.gpu || "cpu", cmakeOptions: buildOptions.customCmakeOptions ?? {} });
    } catch {
      // A metadata file that does not parse is a build node-llama-cpp would not load either.
    }
  }
  return builds;
}

/** The local CUDA build a runtime serves with: the first one built for a named architecture, or null. */
export function localCudaBuild(dir = localBuildsDir()): LocalBuild | null {
  return localBuilds(dir).find((b) => b.gpu === "cuda" && b.cmakeOptions[CUDA_ARCH_OPTION]) ?? null;
}

/**
 * Loads `build` and nothing else: never compiles, never falls back to another build (the caller
 * decides the order). Throws when the build, or a device for it, is not on this host.
 */
export async function loadLlama(build: EngineBuild): Promise<Llama> {
  const common = { build: "never", progressLogs: false } as const;
  let llama: Llama;
  if (build === "cuda-local") {
    const local = localCudaBuild();
    if (!local) throw new Error("no local CUDA build on this host (npm run build:engine makes one)");
    llama = await getLlama({ ...common, gpu: "cuda", cmakeOptions: local.cmakeOptions, usePrebuiltBinaries: false });
    if (llama.buildType !== "localBuild") throw new Error(`node-llama-cpp loaded its ${llama.buildType} build, not the local one`);
  } else {
    // No CMake options: the folder of a local build (named after its options) is never this one.
    llama = await getLlama({ ...common, gpu: build === "cpu" ? false : build });
  }
  const wanted = build === "cuda-local" ? "cuda" : build;
  if ((llama.gpu || "cpu") !== wanted) {
    const loaded = llama.gpu || "cpu";
    await llama.dispose();
    throw new Error(`node-llama-cpp loaded the ${loaded} build`);
  }
  return llama;
}

/**
 * Which build serves, for the identity's `engine`: "cuda (local build, sm_90, one-pass label read)",
 * "vulkan (prebuilt)", "cpu (prebuilt)".
 */
export function describeBuild(llama: Pick<Llama, "gpu" | "buildType" | "cmakeOptions">): string {
  const gpu = llama.gpu || "cpu";
  if (llama.buildType !== "localBuild") return `${gpu} (prebuilt)`;
  const archs = llama.cmakeOptions[CUDA_ARCH_OPTION];
  const details = [
    ...(gpu === "cuda" && archs ? [archs.split(";").map((a) => `sm_${a}`).join(" ")] : []),
    ...(llama.cmakeOptions[LABEL_READ_OPTION] ? ["one-pass label read"] : []),
  ];
  return `${gpu} (local build${details.map((d) => `, ${d}`).join("")})`;
}
