/**
 * The engine builds a runtime can load (runtime/engine-build.ts) and `npm run build:engine`
 * (ops/engine-build.ts) where this machine can show them: it has no NVIDIA GPU and no CUDA toolkit,
 * so the build itself is proven on a GPU host (docs/deploy.md section 7 has its figures); here, how
 * local builds are found and named, and what the install step says on a host with nothing to build for.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { describeBuild, localBuilds, localCudaBuild } from "../runtime/engine-build.ts";
import { BUN, ROOT } from "../local/tiers.ts";

const dir = mkdtempSync(join(tmpdir(), "engine-builds-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A local build folder as node-llama-cpp leaves it: Release/ with its metadata, and the done marker. */
function fakeBuild(folder: string, gpu: string | false, options: Record<string, string>, done = true): void {
  mkdirSync(join(dir, folder, "Release"), { recursive: true });
  writeFileSync(join(dir, folder, "Release", "_nlcBuildMetadata.json"), JSON.stringify({ buildOptions: { gpu, customCmakeOptions: options } }));
  if (done) writeFileSync(join(dir, folder, "buildDone.status"), "");
}

describe("local builds", () => {
  it("finds the finished CUDA build made for an architecture, and passes over unfinished and other builds", () => {
    expect(localBuilds(join(dir, "none"))).toEqual([]);
    fakeBuild("linux-x64-aaa", false, { GGML_NATIVE: "ON" });
    fakeBuild("linux-x64-cuda-bbb", "cuda", { CMAKE_CUDA_ARCHITECTURES: "90" }, false);
    fakeBuild("linux-x64-cuda-ccc", "cuda", {});
    expect(localCudaBuild(dir)).toBeNull();
    fakeBuild("linux-x64-cuda-ddd", "cuda", { CMAKE_CUDA_ARCHITECTURES: "90", GGML_CUDA_FA: "ON" });
    mkdirSync(join(dir, "linux-x64-cuda-eee", "Release"), { recursive: true });
    writeFileSync(join(dir, "linux-x64-cuda-eee", "Release", "_nlcBuildMetadata.json"), "{not json");
    writeFileSync(join(dir, "linux-x64-cuda-eee", "buildDone.status"), "");
    expect(localBuilds(dir).map((b) => `${b.folder} ${b.gpu}`)).toEqual(["linux-x64-aaa cpu", "linux-x64-cuda-ccc cuda", "linux-x64-cuda-ddd cuda"]);
    expect(localCudaBuild(dir)).toEqual({ folder: "linux-x64-cuda-ddd", gpu: "cuda", cmakeOptions: { CMAKE_CUDA_ARCHITECTURES: "90", GGML_CUDA_FA: "ON" } });
  });

  it("names the build that serves as the identity's engine says it", () => {
    expect(describeBuild({ gpu: "cuda", buildType: "localBuild", cmakeOptions: { CMAKE_CUDA_ARCHITECTURES: "90" } })).toBe("cuda (local build, sm_90)");
    expect(describeBuild({ gpu: "cuda", buildType: "localBuild", cmakeOptions: { CMAKE_CUDA_ARCHITECTURES: "89;90" } })).toBe("cuda (local build, sm_89 sm_90)");
    expect(describeBuild({ gpu: "cuda", buildType: "prebuilt", cmakeOptions: {} })).toBe("cuda (prebuilt)");
    expect(describeBuild({ gpu: "vulkan", buildType: "prebuilt", cmakeOptions: {} })).toBe("vulkan (prebuilt)");
    expect(describeBuild({ gpu: false, buildType: "prebuilt", cmakeOptions: {} })).toBe("cpu (prebuilt)");
    expect(describeBuild({ gpu: false, buildType: "localBuild", cmakeOptions: {} })).toBe("cpu (local build)");
  });
});

describe("npm run build:engine", () => {
  const run = (args: string[]) => spawnSync(BUN, ["ops/engine-build.ts", ...args], { cwd: ROOT, encoding: "utf8", env: { ...process.env, ENGINE_CACHE_DIR: join(dir, "cache") } });

  // On a GPU host there is something to build: there the build itself is the check (docs/deploy.md).
  it.skipIf(spawnSync("nvidia-smi", ["-L"]).status === 0)("says there is nothing to build for on a host without an NVIDIA GPU, and exits 2", () => {
    const result = run([]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("no NVIDIA GPU found (nvidia-smi): nothing to build; the runtime serves with the prebuilt builds");
  });

  it("refuses an architecture that is not a compute capability, and says the form", () => {
    const result = run(["--arch", "9.0"]);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("--arch 9.0: expected a compute capability such as 90");
  });

  it("prints its usage", () => {
    const result = run(["--help"]);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("usage: npm run build:engine");
  });
});
