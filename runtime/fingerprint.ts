/**
 * A release's fingerprint and its default release id (runs in the runtime, next to the model).
 *
 * The fingerprint is the hex SHA-256 of this UTF-8 text, every line ending in "\n":
 *
 *     decision-service fingerprint v1
 *     weights_sha256=<64 lowercase hex>
 *     adapter_sha256=<64 lowercase hex, or "none">
 *     rendering_version=<RENDERING_VERSION>
 *
 * Registries store fingerprints, so this layout is fixed: changing it changes every release's
 * fingerprint. The inputs are checked so that no value can spill into another line.
 */
import { createHash } from "node:crypto";
import { basename } from "node:path";

export interface FingerprintInputs {
  weightsSha256: string;
  /** SHA-256 of the LoRA adapter GGUF, or null for the base model alone. */
  adapterSha256: string | null;
  renderingVersion: string;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function fingerprintOf({ weightsSha256, adapterSha256, renderingVersion }: FingerprintInputs): string {
  if (!SHA256_HEX.test(weightsSha256)) throw new Error("weights digest must be 64 lowercase hex digits");
  if (adapterSha256 !== null && !SHA256_HEX.test(adapterSha256)) {
    throw new Error("adapter digest must be 64 lowercase hex digits or null");
  }
  if (renderingVersion === "" || /[\r\n]/.test(renderingVersion)) {
    throw new Error("rendering version must be a non-empty single line");
  }
  const text =
    "decision-service fingerprint v1\n" +
    `weights_sha256=${weightsSha256}\n` +
    `adapter_sha256=${adapterSha256 ?? "none"}\n` +
    `rendering_version=${renderingVersion}\n`;
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/**
 * The release id a runtime reports when none is configured, e.g.
 * `local-gemma-3-270m-q4-k-m-3f2a9c01b7de` for `gemma-3-270m-q4_k_m.gguf`: readable, and different
 * whenever the fingerprint is.
 */
export function defaultReleaseId(modelPath: string, fingerprint: string): string {
  const slug =
    basename(modelPath)
      .replace(/\.gguf$/i, "")
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "") || "model";
  return `local-${slug}-${fingerprint.slice(0, 12)}`;
}
