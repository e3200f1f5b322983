/**
 * Retention cleanup (runs in the sidecar's bulk worker, at most once per interval, with or without
 * queued work): the input object, records and results of a batch terminal for `dataMs` (7 days)
 * are deleted and its storage reservation ends (`purged_at`); batch metadata and usage rows go after
 * `metadataMs` (30 days). Several workers may run it at once: every step is idempotent.
 */
import type { Pool } from "@neondatabase/serverless";
import { deleteObject, type EdgeLink } from "./grants.ts";

export interface Retention {
  dataMs: number;
  metadataMs: number;
}

/** Batches purged per run, so that one run stays short. */
const PURGE_BATCH = 100;

export async function runCleanup(pool: Pool, edge: EdgeLink, retention: Retention, log: (line: string) => void): Promise<void> {
  const { rows } = await pool.query(
    `SELECT id, object_key FROM batches
      WHERE purged_at IS NULL AND finished_at IS NOT NULL AND finished_at <= now() - make_interval(secs => $1::double precision / 1000)
      ORDER BY finished_at LIMIT $2`,
    [retention.dataMs, PURGE_BATCH],
  );
  for (const row of rows) {
    try {
      // The object first: a batch marked purged never keeps its input behind.
      await deleteObject(edge, String(row.object_key));
      await pool.query("DELETE FROM batch_results WHERE batch_id = $1", [row.id]);
      await pool.query("DELETE FROM batch_records WHERE batch_id = $1", [row.id]);
      await pool.query("UPDATE batches SET purged_at = now() WHERE id = $1 AND purged_at IS NULL", [row.id]);
    } catch (err) {
      log(`sidecar: cleanup of batch ${row.id} failed, retried next run: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const cutoff = [retention.metadataMs];
  await pool.query("DELETE FROM usage_records WHERE created_at <= now() - make_interval(secs => $1::double precision / 1000)", cutoff);
  await pool.query(
    "DELETE FROM batches WHERE purged_at IS NOT NULL AND finished_at <= now() - make_interval(secs => $1::double precision / 1000)",
    cutoff,
  );
}
