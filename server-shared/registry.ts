/**
 * A model registry entry as the server tiers and operator commands read it from Postgres
 * (`model_registry` view in schema.sql). The runtime address, the name of its secret's variable and
 * the sidecar address never leave the server side.
 */
import { z } from "zod";
import { Calibration } from "../contract/calibration.ts";
import { Modality } from "./runtime-protocol.ts";
import { SavedTask, TrainedHeads } from "./trained.ts";

export const RegistryEntry = z.object({
  id: z.string(),
  fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  aliases: z.array(z.string()),
  owners: z.array(z.string().uuid()).nullable(),
  /** Runtime address; only the sidecar calls it. */
  url: z.string(),
  token_env: z.string().regex(/^[A-Z_][A-Z0-9_]*$/),
  release_date: z.union([z.string(), z.date()]).transform((d) => (typeof d === "string" ? d.slice(0, 10) : d.toISOString().slice(0, 10))),
  description: z.string(),
  retired_at: z.union([z.string(), z.date()]).nullable(),
  /** The sidecar that serves this release (the edge forwards its decisions there); null: none yet. */
  sidecar_url: z.string().nullable(),
  /** The identity the release's runtime reports: the release itself, or a calibrated release's base. */
  runtime_release: z.string(),
  runtime_fingerprint: z.string().regex(/^[0-9a-f]{64}$/),
  /** Applied by the readout; null for an uncalibrated release. */
  calibration: Calibration.nullable(),
  has_calibration_report: z.boolean(),
  /** Bumped by every change to the release's row (schema.sql); caches of the entry are keyed by it. */
  revision: z.coerce.number().int().positive(),
  /** A trained release's saved task and heads (trained.ts), and the training that made it; null otherwise. */
  task: SavedTask.nullable(),
  head: TrainedHeads.nullable(),
  training_id: z.string().uuid().nullable(),
  /** What the release's runtime reads: a decision's text, or a still image (its base's, for a derived release). */
  modality: Modality,
});
export type RegistryEntry = z.infer<typeof RegistryEntry>;

export const REGISTRY_COLUMNS =
  "id, fingerprint, aliases, owners, url, token_env, release_date, description, retired_at, sidecar_url, runtime_release, runtime_fingerprint, calibration, has_calibration_report, revision, task, head, training_id, modality";

/** The fingerprint of a calibrated release: its base's fingerprint and its parameters, hashed together. */
export async function calibratedFingerprint(baseFingerprint: string, calibration: Calibration): Promise<string> {
  const text = `calibrated-release-v1\n${baseFingerprint}\n${JSON.stringify(Calibration.parse(calibration))}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
