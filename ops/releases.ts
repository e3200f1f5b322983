/**
 * The model registry's statements (releases and aliases in Postgres), for the registry command
 * (registry.ts), calibration (calibrate.ts), the local stack launcher and tests. Runs wherever an
 * operator command runs, against DATABASE_URL.
 */
import type pg from "pg";
import { checkServiceUrl } from "../contract/urls.ts";

export interface ReleaseInput {
  id: string;
  fingerprint: string;
  url: string;
  token_env: string;
  release_date: string;
  description: string;
  owners: string[] | null;
  /** The sidecar that serves the release; null: not served yet. */
  sidecar_url: string | null;
  /** What its runtime reads (default "text"); an image runtime's backbone is "image". Fixed once registered. */
  modality?: "text" | "image";
}

/**
 * Adds a release, or updates the addresses, secret variable and description of the same release.
 * The models customers trained on it run on its runtime: they follow it to a new address and secret
 * variable in the same transaction (a runtime that moved, as on every local restart, leaves none behind).
 */
export async function registerRelease(db: pg.ClientBase, release: ReleaseInput): Promise<void> {
  checkServiceUrl(release.url, "runtime");
  if (release.sidecar_url !== null) checkServiceUrl(release.sidecar_url, "sidecar");
  await db.query("BEGIN");
  try {
    await upsert(db, release);
    await db.query("COMMIT");
  } catch (err) {
    await db.query("ROLLBACK");
    throw err;
  }
}

async function upsert(db: pg.ClientBase, release: ReleaseInput): Promise<void> {
  await db.query(
    `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, release_date, description, sidecar_url, modality)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, url = EXCLUDED.url, token_env = EXCLUDED.token_env,
           description = EXCLUDED.description, owners = EXCLUDED.owners, sidecar_url = EXCLUDED.sidecar_url`,
    [release.id, release.fingerprint, release.owners, release.url, release.token_env, release.release_date, release.description, release.sidecar_url, release.modality ?? "text"],
  );
  await db.query(
    `UPDATE model_releases SET url = $2, token_env = $3
      WHERE base_release = $1 AND training_id IS NOT NULL AND (url <> $2 OR token_env <> $3)`,
    [release.id, release.url, release.token_env],
  );
}

/** Points `alias` at a serving release, creating the alias if needed. */
export async function pointAlias(db: pg.ClientBase, alias: string, releaseId: string): Promise<void> {
  const { rowCount } = await db.query(
    `INSERT INTO model_aliases (alias, release_id)
     SELECT $1, id FROM model_releases WHERE id = $2 AND retired_at IS NULL
     ON CONFLICT (alias) DO UPDATE SET release_id = EXCLUDED.release_id, updated_at = now()`,
    [alias, releaseId],
  );
  if (rowCount === 0) throw new Error(`no serving release ${releaseId}`);
}

/** Stops serving a release; requests naming it (or an alias still pointing at it) get 404. */
export async function retireRelease(db: pg.ClientBase, releaseId: string): Promise<void> {
  const { rowCount } = await db.query("UPDATE model_releases SET retired_at = coalesce(retired_at, now()) WHERE id = $1", [releaseId]);
  if (rowCount === 0) throw new Error(`no release ${releaseId}`);
}

export async function listReleases(db: pg.ClientBase): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    "SELECT id, fingerprint, aliases, owners, url, token_env, release_date::text AS release_date, description, retired_at, sidecar_url FROM model_registry ORDER BY id",
  );
  return rows;
}
