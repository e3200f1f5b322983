/**
 * Retention cleanup of batches, usage rows and image assets (runs in the sidecar's sweeper,
 * sidecar/sweeper.ts, at most once per interval, with or without queued work): the input object,
 * records and results of a batch terminal for `dataMs` (7 days) are deleted and its storage
 * reservation ends (`purged_at`); batch metadata and usage rows go after `metadataMs` (30 days).
 * Image assets past their retention go too, files first, once no upload grant or finalization lease
 * of theirs is outstanding (server-shared/images.ts `duePurge`). Several sidecars may run it at once:
 * every step is idempotent.
 */
import type { Pool } from "@neondatabase/serverless";
import { poolDb } from "../../server-shared/db.ts";
import { ImageAssetStore } from "../../server-shared/images.ts";
import type { BatchStore } from "../../server-shared/jobs/batches.ts";
import { deleteUsageBefore } from "../usage.ts";
import { deleteObject, type EdgeLink } from "./grants.ts";

export interface Retention {
  dataMs: number;
  metadataMs: number;
}

/** Batches purged per run, so that one run stays short. */
const PURGE_BATCH = 100;

export async function runCleanup(store: BatchStore, pool: Pool, edge: EdgeLink, retention: Retention, log: (line: string) => void): Promise<void> {
  for (const batch of await store.duePurge(retention.dataMs, PURGE_BATCH)) {
    try {
      // The object first: a batch marked purged never keeps its input behind.
      await deleteObject(edge, batch.objectKey);
      await store.purge(batch.id);
    } catch (err) {
      log(`sidecar: cleanup of batch ${batch.id} failed, retried next run: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  await deleteUsageBefore(pool, retention.metadataMs);
  await store.deleteMetadata(retention.metadataMs);
  const images = new ImageAssetStore(poolDb(pool));
  for (const asset of await images.duePurge(PURGE_BATCH)) {
    try {
      for (const object of asset.objects) await deleteObject(edge, object);
      await images.purge(asset.id);
    } catch (err) {
      log(`sidecar: cleanup of image asset ${asset.id} failed, retried next run: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
