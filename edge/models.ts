/**
 * Model resolution (runs in workerd): an alias or a release id the account may use, among serving
 * releases, and the sidecar that serves it. Unknown and forbidden names both resolve to null, so the
 * caller answers one identical 404.
 */
import type { NeonQueryFunction } from "@neondatabase/serverless";
import type { ResolvedRelease } from "../server-shared/sidecar-protocol.ts";

export interface Resolution {
  release: ResolvedRelease;
  /** Where the release's decisions go; null when the registry assigns it to no sidecar yet. */
  sidecarUrl: string | null;
}

export async function resolveModel(sql: NeonQueryFunction<false, false>, name: string, accountId: string): Promise<Resolution | null> {
  const rows = await sql`
    SELECT r.id, r.fingerprint, r.sidecar_url
      FROM model_releases r
     WHERE r.retired_at IS NULL
       AND (r.owners IS NULL OR ${accountId}::uuid = ANY (r.owners))
       AND (r.id = ${name} OR r.id = (SELECT release_id FROM model_aliases WHERE alias = ${name}))
     ORDER BY (r.id = ${name}) DESC
     LIMIT 1`;
  const row = rows[0];
  if (!row) return null;
  return {
    release: { id: String(row.id), fingerprint: String(row.fingerprint) },
    sidecarUrl: row.sidecar_url === null ? null : String(row.sidecar_url),
  };
}
