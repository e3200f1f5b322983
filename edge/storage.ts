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

/** What an object holds, by its key: the size it may have and how to name it in an error. */
export function objectKind(key: string): { holds: string; maxBytes: number; image: "source" | "canonical" | null } {
  if (key.startsWith("trainings/")) return { holds: "a training file", maxBytes: LIMITS.trainingFileBytes, image: null };
  if (key.startsWith("images/")) {
    return key.endsWith("/source")
      ? { holds: "an image", maxBytes: LIMITS.imageSourceBytes, image: "source" }
      : { holds: "a canonical image", maxBytes: LIMITS.imageCanonicalBytes, image: "canonical" };
  }
  return { holds: "a batch input", maxBytes: LIMITS.bulkFileBytes, image: null };
}

/** The grants of this deployment: STORAGE_ENDPOINT when set, else this edge's own /storage. */
export function storageGrants(c: Context<AppEnv>): StorageGrants {
  const settings = services(c.env).settings;
  return {
    accessKeyId: settings.STORAGE_ACCESS_KEY_ID,
    secretAccessKey: settings.STORAGE_SECRET_ACCESS_KEY,
    endpoint: settings.STORAGE_ENDPOINT ?? `${new URL(c.req.url).origin}${STORAGE_PATH}`,
  };
}
