/**
 * This deployment's storage grants (runs in workerd): the signing key pair and where grants point,
 * from the edge's settings. The signing itself is server-shared/grants.ts.
 */
import type { Context } from "hono";
import type { StorageGrants } from "../server-shared/grants.ts";
import type { AppEnv } from "./env.ts";
import { services } from "./services.ts";

/** Where the edge serves grants itself. */
export const STORAGE_PATH = "/storage";

/** The objects grants are given for: batch inputs and training files (both within LIMITS.bulkFileBytes). */
export const UPLOAD_OBJECT = /^(?:batches\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/input|trainings\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/examples)\.jsonl$/;

/** The grants of this deployment: STORAGE_ENDPOINT when set, else this edge's own /storage. */
export function storageGrants(c: Context<AppEnv>): StorageGrants {
  const settings = services(c.env).settings;
  return {
    accessKeyId: settings.STORAGE_ACCESS_KEY_ID,
    secretAccessKey: settings.STORAGE_SECRET_ACCESS_KEY,
    endpoint: settings.STORAGE_ENDPOINT ?? `${new URL(c.req.url).origin}${STORAGE_PATH}`,
  };
}
