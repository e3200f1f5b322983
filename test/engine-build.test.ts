/**
 * The engine builds a runtime can load (runtime/engine-build.ts) and `npm run build:engine`
 * (ops/engine-build.ts) where this machine can show them: it has no NVIDIA GPU and no CUDA toolkit,
 * so the build itself is proven on a GPU host (docs/deploy.md section 7 has its figures); here, how
 * local builds are found and named, what the install step says on a host with nothing to build for,
 * and that its patch to node-llama-cpp's addon (the one-walk label read) applies to the installed
 * node-llama-cpp, compiles against its bundled llama.cpp, and leaves node_modules as it was, and that
 * its walks over the logits compute the general path's numbers bit for bit (compiled alone, run on
 * thousands of logit vectors). Where it runs in the addon, `npm run bench:label-read` on the build
 * exits 1 unless its numbers are the general path's, bit for bit.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { describeBuild, enginePath, LABEL_READ_OPTION, localBuilds, localCudaBuild } from "../runtime/engine-build.ts";
import { BUN, ROOT } from "../local/tiers.ts";
import { labelReadPatchId, patchedSource, unpatchedSource, withPatchedAddon } from "../ops/engine-patch/label-read.ts";

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
    expect(describeBuild({ gpu: "cuda", buildType: "localBuild", cmakeOptions: { CMAKE_CUDA_ARCHITECTURES: "90", [LABEL_READ_OPTION]: labelReadPatchId() } })).toBe(
      "cuda (local build, sm_90, one-pass label read)",
    );
  });
});

describe("the label-read patch to node-llama-cpp's addon", () => {
  const addonSource = enginePath("llama", "addon", "AddonContext.cpp");
  // As installed (a build under way on this host patches the file for its length).
  const original = unpatchedSource(readFileSync(addonSource, "utf8"));

  it("goes in once, at the top of the sample-token worker, right after its sampler chain is built", () => {
    const patched = patchedSource(original);
    expect(patched.split("bool DecisionServiceLabelRead()").length).toBe(2);
    expect(patched).toContain("        void SampleToken() {\n            sampler->rebuildChainIfNeeded();\n            if (DecisionServiceLabelRead()) return;\n");
    // Everything else is the file as installed.
    expect(unpatchedSource(patched)).toBe(original);
    expect(patched.length).toBeGreaterThan(original.length + 1000);
    expect(labelReadPatchId()).toMatch(/^[0-9a-f]{12}$/);
  });

  it("refuses a source it was not written for, and one already patched", () => {
    expect(() => patchedSource(original.replace("sampler->rebuildChainIfNeeded();", "sampler->rebuildChain();"))).toThrow(/not the one the label-read patch was written for/);
    expect(() => patchedSource(patchedSource(original))).toThrow(/not found exactly once, unpatched/);
    expect(() => patchedSource(original + original)).toThrow(/not found exactly once/);
  });

  it("puts the installed file back after the build, also when the build fails or a killed build had left its patch in", () => {
    const copy = join(dir, "AddonContext.cpp");
    writeFileSync(copy, patchedSource(original));
    expect(withPatchedAddon(copy, () => readFileSync(copy, "utf8").includes("DecisionServiceLabelRead"))).toBe(true);
    expect(readFileSync(copy, "utf8")).toBe(original);
    expect(() => withPatchedAddon(copy, () => { throw new Error("the compiler failed"); })).toThrow("the compiler failed");
    expect(readFileSync(copy, "utf8")).toBe(original);
  });

  // The compiler checks the fragment against the types it uses (the worker, its sampler, llama.h) as
  // node-llama-cpp's build would see them: its addon's headers and its bundled llama.cpp release.
  it.skipIf(spawnSync("g++", ["--version"]).status !== 0)("compiles inside the installed addon's source (g++, syntax and types)", () => {
    const llamaCpp = join(dir, "llama.cpp");
    const git = (args: string[]) => spawnSync("git", args, { cwd: dir, encoding: "utf8" });
    expect(git(["clone", "-q", "--no-checkout", enginePath("llama", "gitRelease.bundle"), llamaCpp]).status).toBe(0);
    expect(git(["-C", llamaCpp, "checkout", "-q", "HEAD", "--", "include", "ggml/include", "src", "common", "vendor"]).status).toBe(0);
    const source = join(dir, "AddonContextPatched.cpp");
    writeFileSync(source, patchedSource(original));
    const includes = [enginePath("llama", "addon"), llamaCpp, ...["include", "ggml/include", "src", "common", "vendor"].map((d) => join(llamaCpp, d)), join(ROOT, "node_modules/node-addon-api"), join(ROOT, "node_modules/node-api-headers/include")];
    const compiled = spawnSync("g++", ["-std=c++17", "-fsyntax-only", "-DNAPI_VERSION=8", ...includes.map((i) => `-I${i}`), source], { encoding: "utf8" });
    expect(compiled.stderr).toBe("");
    expect(compiled.status).toBe(0);
    // And the same compile fails on a fragment that does not fit, so the check above can fail.
    writeFileSync(source, patchedSource(original).replace("returnLogits.includeLowest ||", "returnLogits.includeLowestValue ||"));
    expect(spawnSync("g++", ["-std=c++17", "-fsyntax-only", "-DNAPI_VERSION=8", ...includes.map((i) => `-I${i}`), source]).status).not.toBe(0);
  }, 60_000);

  // The walks skip the terms too small to change the float sum: held here against the general path's
  // arithmetic on thousands of logit vectors (test/fixtures/label-read-walk.cpp), compiled as the build
  // compiles the addon (-O3), so that a skip that changed one bit would fail.
  it.skipIf(spawnSync("g++", ["--version"]).status !== 0)("reads the general path's greedy token and weight, bit for bit, on 2,060 logit vectors", () => {
    const fragment = readFileSync(join(ROOT, "ops/engine-patch/label-read.inc"), "utf8");
    const start = fragment.indexOf("            float lanes[8];");
    const end = fragment.indexOf("            if (std::find(returnLogits.filter.begin()");
    expect(start).toBeGreaterThan(0);
    expect(end).toBeGreaterThan(start);
    const walk = join(dir, "walk");
    mkdirSync(walk, { recursive: true });
    const compileAndRun = (body: string) => {
      writeFileSync(join(walk, "label-read-walk.inc"), body);
      writeFileSync(join(walk, "label-read-walk.cpp"), readFileSync(join(ROOT, "test/fixtures/label-read-walk.cpp")));
      const compiled = spawnSync("g++", ["-std=c++17", "-O3", "-o", join(walk, "check"), join(walk, "label-read-walk.cpp")], { encoding: "utf8" });
      expect(compiled.stderr).toBe("");
      return spawnSync(join(walk, "check"), { encoding: "utf8" });
    };
    const result = compileAndRun(fragment.slice(start, end));
    expect(result.stdout).toContain("2060 cases, 0 mismatches");
    expect(result.status).toBe(0);
    // A skip half an ulp too bold changes sums, and the check says so.
    const bolder = compileAndRun(fragment.slice(start, end).replace("(float)(exponent - 25)", "(float)(exponent - 24)"));
    expect(bolder.status).toBe(1);
    expect(bolder.stdout).toMatch(/[1-9]\d* mismatches/);
  }, 60_000);
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
