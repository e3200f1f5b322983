/**
 * Model resolution (runs in workerd): an alias or a release id the account may use, among serving
 * releases. Unknown and forbidden names both resolve to null, so the caller answers one identical 404.
 */
import type { ResolvedRelease } from "../contract/sidecar-protocol.ts";
import type { Env } from "./env.ts";
import { sql } from "./services.ts";

export async function resolveModel(env: Env, name: string, accountId: string): Promise<ResolvedRelease | null> {
  const rows = await sql(env)`
    SELECT r.id, r.fingerprint, r.url, r.token_env
      FROM model_releases r
     WHERE r.retired_at IS NULL
       AND (r.owners IS NULL OR ${accountId}::uuid = ANY (r.owners))
       AND (r.id = ${name} OR r.id = (SELECT release_id FROM model_aliases WHERE alias = ${name}))
     ORDER BY (r.id = ${name}) DESC
     LIMIT 1`;
  const row = rows[0];
  if (!row) return null;
  return { id: String(row.id), fingerprint: String(row.fingerprint), url: String(row.url), token_env: String(row.token_env) };
}
