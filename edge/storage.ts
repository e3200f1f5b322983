/**
 * This deployment's storage grants (runs in workerd): the signing key pair and where grants point,
 * from the edge's settings. The signing itself is server-shared/grants.ts.
 */
import type { Context } from "hono";
import { LIMITS } from "../contract/limits.ts";
import type { StorageGrants } from "../server-shared/grants.ts";
import type { AppEnv } from "./env.ts";
import { services } from "./services.ts";

/** Where the edge serves grants itself. */
export const STORAGE_PATH = "/storage";

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/**
 * The objects grants are given for: batch inputs and training files (both within
 * LIMITS.bulkFileBytes), and image assets' originals and canonical PNGs (contract/images.ts).
 */
export const UPLOAD_OBJECT = new RegExp(`^(?:batches/${UUID}/input\\.jsonl|trainings/${UUID}/examples\\.jsonl|images/${UUID}/(?:source|canonical-[1-9][0-9]{0,8}\\.png))$`);

/** What an object holds, by its key: the size it may have, how to name it in an error, and what to do once it is uploaded. */
export function objectKind(key: string): { holds: string; maxBytes: number; image: "source" | "canonical" | null; uploaded: string } {
  if (key.startsWith("trainings/")) {
    return { holds: "a training file", maxBytes: LIMITS.trainingFileBytes, image: null, uploaded: "this training's file has already been uploaded and cannot be replaced; submit it, or create a new training for another file" };
  }
  if (key.startsWith("images/")) {
    const uploaded = "this file has already been uploaded and cannot be replaced; complete the asset, or create a new one for another file";
    return key.endsWith("/source")
      ? { holds: "an image", maxBytes: LIMITS.imageSourceBytes, image: "source", uploaded }
      : { holds: "a canonical image", maxBytes: LIMITS.imageCanonicalBytes, image: "canonical", uploaded };
  }
  return { holds: "a batch input", maxBytes: LIMITS.bulkFileBytes, image: null, uploaded: "this batch's input has already been uploaded and cannot be replaced; submit it, or create a new batch for another file" };
}

/**
 * The grants of this deployment, for `clients` (a batch's or an image's upload) or for `hosts` (the
 * sidecars' and runtimes' reads and writes): STORAGE_ENDPOINT when set, else this edge's own /storage
 * at its configured base URL (PUBLIC_URL, or INTERNAL_URL for hosts). Never the request's Host: a
 * caller who names another host gets no grant pointing there, and no sidecar is sent there.
 * `edgeOnly`: this edge's /storage even when STORAGE_ENDPOINT is set, for an upload whose size was
 * not declared (R2 bounds an upload only by a signed Content-Length; /storage bounds every object).
 */
export function storageGrants(c: Context<AppEnv>, audience: "clients" | "hosts", opts: { edgeOnly?: boolean } = {}): StorageGrants {
  const settings = services(c.env).settings;
  const base = audience === "hosts" ? (settings.INTERNAL_URL ?? settings.PUBLIC_URL) : settings.PUBLIC_URL;
  const own = `${base.replace(/\/+$/, "")}${STORAGE_PATH}`;
  return {
    accessKeyId: settings.STORAGE_ACCESS_KEY_ID,
    secretAccessKey: settings.STORAGE_SECRET_ACCESS_KEY,
    endpoint: opts.edgeOnly ? own : (settings.STORAGE_ENDPOINT ?? own),
  };
}
