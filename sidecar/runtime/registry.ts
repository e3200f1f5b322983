/**
 * The releases this sidecar serves, read from the registry (runs in the sidecar): those whose
 * `sidecar_url` is this sidecar's own SIDECAR_URL. Each entry names its runtime's address and the
 * variable that holds its secret; the sidecar is the only tier that reads them.
 */
import type { Pool } from "@neondatabase/serverless";
import { REGISTRY_COLUMNS, RegistryEntry } from "../../server-shared/registry.ts";

/** Every serving release assigned to the sidecar at `selfUrl`, by id. */
export async function servedReleases(pool: Pool, selfUrl: string): Promise<RegistryEntry[]> {
  const { rows } = await pool.query(
    `SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE retired_at IS NULL AND sidecar_url = $1 ORDER BY id`,
    [selfUrl],
  );
  return rows.map((row) => RegistryEntry.parse(row));
}

/** The serving release `id` if it is assigned to the sidecar at `selfUrl`; null otherwise. */
export async function servedRelease(pool: Pool, selfUrl: string, id: string): Promise<RegistryEntry | null> {
  const { rows } = await pool.query(
    `SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE retired_at IS NULL AND sidecar_url = $1 AND id = $2`,
    [selfUrl, id],
  );
  return rows[0] ? RegistryEntry.parse(rows[0]) : null;
}

/** The ids of every serving release assigned to the sidecar at `selfUrl` (what its bulk worker can run). */
export async function servedReleaseIds(pool: Pool, selfUrl: string): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>("SELECT id FROM model_releases WHERE retired_at IS NULL AND sidecar_url = $1", [selfUrl]);
  return rows.map((row) => row.id);
}

/** The registered release `id` whoever serves it (a trained release is checked here before it is served); null when retired or unknown. */
export async function registeredRelease(pool: Pool, id: string): Promise<RegistryEntry | null> {
  const { rows } = await pool.query(`SELECT ${REGISTRY_COLUMNS} FROM model_registry WHERE retired_at IS NULL AND id = $1`, [id]);
  return rows[0] ? RegistryEntry.parse(rows[0]) : null;
}

/** The sidecars other than the one at `selfUrl` that serve any of the releases `ids` (whom a batch's records wait for). */
export async function otherSidecarsServing(pool: Pool, selfUrl: string, ids: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ sidecar_url: string }>(
    "SELECT DISTINCT sidecar_url FROM model_releases WHERE retired_at IS NULL AND id = ANY ($1) AND sidecar_url IS NOT NULL AND sidecar_url <> $2",
    [ids, selfUrl],
  );
  return rows.map((row) => row.sidecar_url);
}
