/**
 * Model resolution (runs in workerd): an alias or a release id the account may use, among serving
 * releases, and the sidecar that serves it. Unknown and forbidden names both resolve to null, so the
 * caller answers one identical 404. The decisions route reads it in the same query as the key
 * (`keyAndModel`), so a decision costs one Postgres round trip at the edge; a trained release
 * resolves only once it is active (served: its identity was verified, jobs/trainings.ts activate). A
 * decision may be answered from the key cache (auth/key-cache.ts), which the sidecar confirms against
 * Postgres before it answers, so a retired release or a moved alias applies on the very next request
 * either way. The release's row revision goes to the sidecar with it, so the sidecar's copy of the
 * entry is renewed on the next request too.
 */
import type { NeonQueryFunction } from "@neondatabase/serverless";
import { z } from "zod";
import { Column, httpDb, raw, sql as piece } from "../server-shared/db.ts";
import type { ResolvedRelease } from "../server-shared/sidecar-protocol.ts";
import { releaseFor } from "../server-shared/key-check.ts";
import { KEY_COLUMNS } from "./auth/api-key.ts";

export interface Resolution {
  release: ResolvedRelease;
  /** Where the release's decisions go; null when the registry assigns it to no sidecar yet. */
  sidecarUrl: string | null;
  /** What the release reads: text, or an image (an image backbone, or a model trained on one). */
  modality: "text" | "image";
  /** Whether it is a trained model (a saved task its requests must repeat). */
  trained: boolean;
}

type Query = NeonQueryFunction<false, false>;

/** A resolved release's row (releaseFor's columns). */
const ResolvedRow = z
  .object({ id: z.string(), fingerprint: z.string(), sidecar_url: z.string().nullable(), revision: Column.int, modality: z.enum(["text", "image"]), trained: z.boolean() })
  .transform(
    (row): Resolution => ({
      release: { id: row.id, fingerprint: row.fingerprint, revision: row.revision },
      sidecarUrl: row.sidecar_url,
      modality: row.modality,
      trained: row.trained,
    }),
  );

export async function resolveModel(sql: Query, name: string, accountId: string): Promise<Resolution | null> {
  const rows = await httpDb(sql).query(releaseFor(piece`${name}::text`, piece`${accountId}::uuid`));
  const row = rows[0];
  return row ? ResolvedRow.parse(row) : null;
}

/**
 * The key's row (auth/api-key.ts KEY_COLUMNS, for `acceptKey`) and the model its account resolves
 * `name` to, in one query. The row is undefined for an unknown key; the resolution null for an
 * unknown or forbidden model.
 */
export async function keyAndModel(sql: Query, keyId: string, name: string): Promise<{ key: Record<string, unknown> | undefined; model: Resolution | null }> {
  const rows = await httpDb(sql).query(
    piece`SELECT ${raw(KEY_COLUMNS)}, m.id AS release_id, m.fingerprint AS release_fingerprint, m.sidecar_url AS release_sidecar_url, m.revision AS release_revision,
                 m.modality AS release_modality, m.trained AS release_trained
            FROM api_keys k JOIN accounts a ON a.id = k.account_id
            LEFT JOIN LATERAL (${releaseFor(piece`${name}::text`, piece`a.id`)}) m ON true
           WHERE k.id = ${keyId}`,
  );
  const row = rows[0];
  // The release's columns are prefixed in this row; no release: the name resolves to none for the account.
  const model =
    row && row.release_id !== null
      ? ResolvedRow.parse({
          id: row.release_id,
          fingerprint: row.release_fingerprint,
          sidecar_url: row.release_sidecar_url,
          revision: row.release_revision,
          modality: row.release_modality,
          trained: row.release_trained,
        })
      : null;
  return { key: row, model };
}
