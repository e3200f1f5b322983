import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { defaultReleaseId, fingerprintOf } from "./fingerprint.ts";

const GEMMA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";
const ADAPTER = "0123456789abcdef".repeat(4);
const base = { weightsSha256: GEMMA, adapterSha256: null, renderingVersion: "render-v1" };

describe("fingerprintOf", () => {
  it("is the SHA-256 of the documented layout", () => {
    const text =
      "decision-service fingerprint v1\n" +
      `weights_sha256=${GEMMA}\n` +
      "adapter_sha256=none\n" +
      "rendering_version=render-v1\n";
    expect(fingerprintOf(base)).toBe(createHash("sha256").update(text).digest("hex"));
  });

  it("is stable for the default model", () => {
    // Pinned: registries store fingerprints, so a change here would orphan every registered release.
    expect(fingerprintOf(base)).toBe("83de467ac5e56cd721a3103671253e421f11db3733ede6c18723dd211443a0a5");
  });

  it("changes with the weights, the adapter and the rendering version", () => {
    const fingerprints = [
      fingerprintOf(base),
      fingerprintOf({ ...base, weightsSha256: `${GEMMA.slice(0, -1)}9` }),
      fingerprintOf({ ...base, adapterSha256: ADAPTER }),
      fingerprintOf({ ...base, adapterSha256: `${ADAPTER.slice(0, -1)}0` }),
      fingerprintOf({ ...base, renderingVersion: "render-v2" }),
    ];
    expect(new Set(fingerprints).size).toBe(fingerprints.length);
    for (const fingerprint of fingerprints) expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
  });

  it("does not confuse an adapter digest with the weights digest", () => {
    expect(fingerprintOf({ ...base, weightsSha256: ADAPTER, adapterSha256: GEMMA })).not.toBe(
      fingerprintOf({ ...base, weightsSha256: GEMMA, adapterSha256: ADAPTER }),
    );
  });

  it("refuses inputs that could spill into another line of the layout", () => {
    expect(() => fingerprintOf({ ...base, weightsSha256: GEMMA.toUpperCase() })).toThrow(/weights/);
    expect(() => fingerprintOf({ ...base, weightsSha256: `${GEMMA}\n` })).toThrow(/weights/);
    expect(() => fingerprintOf({ ...base, adapterSha256: "none" })).toThrow(/adapter/);
    expect(() => fingerprintOf({ ...base, renderingVersion: "" })).toThrow(/rendering/);
    expect(() => fingerprintOf({ ...base, renderingVersion: "v1\nadapter_sha256=none" })).toThrow(/rendering/);
  });
});

describe("defaultReleaseId", () => {
  const fingerprint = fingerprintOf(base);

  it("names the file and the first 12 hex digits of the fingerprint", () => {
    expect(defaultReleaseId("/models/gemma-3-270m-q4_k_m.gguf", fingerprint)).toBe("local-gemma-3-270m-q4-k-m-83de467ac5e5");
  });

  it("slugs any file name to lowercase letters, digits and single dashes", () => {
    expect(defaultReleaseId("My Model (v2)__final.GGUF", fingerprint)).toBe("local-my-model-v2-final-83de467ac5e5");
    expect(defaultReleaseId("/x/weights.bin", fingerprint)).toBe("local-weights-bin-83de467ac5e5");
  });

  it("falls back to 'model' when nothing of the name is left", () => {
    expect(defaultReleaseId("/x/___.gguf", fingerprint)).toBe("local-model-83de467ac5e5");
  });

  it("differs whenever the fingerprint does", () => {
    const other = fingerprintOf({ ...base, renderingVersion: "render-v2" });
    expect(defaultReleaseId("m.gguf", other)).not.toBe(defaultReleaseId("m.gguf", fingerprint));
  });
});
