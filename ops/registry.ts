/**
 * The model registry's writes, for operators and the local stack launcher. A release row is
 * immutable in id and fingerprint (a trigger in schema.sql enforces it); its address may move.
 */
import type pg from "pg";

export interface ReleaseInput {
  id: string;
  fingerprint: string;
  url: string;
  token_env: string;
  release_date: string;
  description: string;
  owners: string[] | null;
}

/** Adds a release, or updates the address, secret variable and description of the same release. */
export async function registerRelease(db: pg.ClientBase, release: ReleaseInput): Promise<void> {
  await db.query(
    `INSERT INTO model_releases (id, fingerprint, owners, url, token_env, release_date, description)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (id) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, url = EXCLUDED.url, token_env = EXCLUDED.token_env,
           description = EXCLUDED.description`,
    [release.id, release.fingerprint, release.owners, release.url, release.token_env, release.release_date, release.description],
  );
}

/** Points `alias` at `releaseId`, creating the alias if needed. */
export async function pointAlias(db: pg.ClientBase, alias: string, releaseId: string): Promise<void> {
  await db.query(
    `INSERT INTO model_aliases (alias, release_id) VALUES ($1, $2)
     ON CONFLICT (alias) DO UPDATE SET release_id = EXCLUDED.release_id, updated_at = now()`,
    [alias, releaseId],
  );
}
