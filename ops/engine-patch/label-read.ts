/**
 * The one change `npm run build:engine` makes to node-llama-cpp's addon before compiling it:
 * label-read.inc, a fast path for the runtime's label read inside the addon's sample-token worker,
 * with the same numbers as the general path. It is inserted at the top of `SampleToken()` in
 * `llama/addon/AddonContext.cpp` for the build and the file is put back afterwards, so node_modules
 * stays as npm installed it. The build records the patch's id as a CMake option that CMake itself
 * ignores (runtime/engine-build.ts LABEL_READ_OPTION): node-llama-cpp keeps it in the build's
 * metadata, so the runtime's identity can say the build reads labels in one pass, and a build made
 * with another version of the patch is rebuilt.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

const FRAGMENT = readFileSync(new URL("./label-read.inc", import.meta.url), "utf8");
/** Where the fragment goes: the start of the worker's `SampleToken()`, in node-llama-cpp 3.22.1. */
const ANCHOR = "        void SampleToken() {\n            sampler->rebuildChainIfNeeded();\n";

/** The patch's id: the first 12 hex digits of the SHA-256 of the fragment. */
export function labelReadPatchId(): string {
  return createHash("sha256").update(FRAGMENT).digest("hex").slice(0, 12);
}

const CALL = "            if (DecisionServiceLabelRead()) return;\n";
/** A patch a build left in place when it was killed: from the fragment's first line to the call after the anchor. */
const LEFT_IN_PLACE = /^ {8}\/\/ decision-service's label read[\s\S]*?\n( {8}void SampleToken\(\) \{\n {12}sampler->rebuildChainIfNeeded\(\);\n) {12}if \(DecisionServiceLabelRead\(\)\) return;\n/m;

/** The addon source as installed: `source` with any version of this patch taken out. */
export function unpatchedSource(source: string): string {
  return source.replace(LEFT_IN_PLACE, "$1");
}

/** The addon source with the fragment in place; throws where the source is not the one it was written for. */
export function patchedSource(source: string): string {
  const at = source.indexOf(ANCHOR);
  if (at < 0 || source.indexOf(ANCHOR, at + 1) >= 0 || source.includes("DecisionServiceLabelRead")) {
    throw new Error("the addon's AddonContext.cpp is not the one the label-read patch was written for (node-llama-cpp 3.22.1): its SampleToken() start was not found exactly once, unpatched");
  }
  return source.slice(0, at) + FRAGMENT + ANCHOR + CALL + source.slice(at + ANCHOR.length);
}

/**
 * Patches the addon source at `path` for the length of `build`, then puts the file back as installed
 * (also where a build killed before left a patch in it).
 */
export function withPatchedAddon<T>(path: string, build: () => T): T {
  const original = unpatchedSource(readFileSync(path, "utf8"));
  writeFileSync(path, patchedSource(original));
  try {
    return build();
  } finally {
    writeFileSync(path, original);
  }
}
