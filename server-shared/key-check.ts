/**
 * The API key and model checks a real-time decision rests on, written once for both tiers that run
 * them (server-only):
 *
 * - `releaseFor`: the release a model name resolves to for an account, as SQL (edge/models.ts reads it
 *   in the same query as the key).
 * - `keyStands`: the sidecar's confirmation of an edge that answered from its key cache
 *   (edge/auth/key-cache.ts): read in Postgres while the decision's passes run, and required before
 *   the answer is given or its usage recorded. The key is still unrevoked and unexpired, its account
 *   active, and the model still resolves to the release (and row revision) the edge sent. Anything
 *   else and the edge forgets what it kept and reads the key again, so a revoked key, a disabled
 *   account or a moved alias applies on the very next request, as without the cache.
 *
 *     const stands = await keyStands(poolDb(pool), { keyId, accountId, model: "svc-shared", release });
 */
import { z } from "zod";
import { Column, sql, type Db, type Sql } from "./db.ts";

/** The release a name (a piece of SQL) resolves to for an account (a piece of SQL): at most one row. */
export const releaseFor = (name: Sql, account: Sql): Sql => sql`
  SELECT r.id, r.fingerprint, r.sidecar_url, r.revision, r.modality, r.task IS NOT NULL AS trained
    FROM model_releases r
   WHERE r.retired_at IS NULL
     AND (r.owners IS NULL OR ${account} = ANY (r.owners))
     AND (r.training_id IS NULL OR r.sidecar_url IS NOT NULL)
     AND (r.id = ${name} OR r.id = (SELECT release_id FROM model_aliases WHERE alias = ${name}))
   ORDER BY (r.id = ${name}) DESC
   LIMIT 1`;

export interface KeyCheck {
  keyId: string;
  accountId: string;
  /** The model name the request gave. */
  model: string;
  /** The release the edge resolved it to, and the row revision it read. */
  release: { id: string; revision: number };
}

const Standing = z.object({ key_stands: z.boolean(), release_id: z.string().nullable(), release_revision: Column.int.nullable() });

/** Whether the key, its account and the model's resolution are still what the edge answered from (one query). */
export async function keyStands(db: Db, check: KeyCheck): Promise<boolean> {
  const rows = await db.query(
    sql`SELECT k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now()) AND a.status = 'active' AS key_stands,
               m.id AS release_id, m.revision AS release_revision
          FROM api_keys k JOIN accounts a ON a.id = k.account_id
          LEFT JOIN LATERAL (${releaseFor(sql`${check.model}::text`, sql`a.id`)}) m ON true
         WHERE k.id = ${check.keyId} AND k.account_id = ${check.accountId}::uuid`,
  );
  const row = rows[0] && Standing.parse(rows[0]);
  return row !== undefined && row.key_stands && row.release_id === check.release.id && row.release_revision === check.release.revision;
}
