/**
 * Retention cleanup (runs in the sidecar's sweeper, sidecar/sweeper.ts, at most once per interval,
 * with or without queued work). For every kind of job (`cleanJobs`): the input file of a job ended in
 * a status whose input nothing reads again goes at once (a cancelled, failed or expired batch), and a
 * job due for purge has its input object and data deleted (`purged_at`: a batch's storage reservation
 * ends). Then (`runCleanup`) batch metadata and usage rows go after `metadataMs` (30 days), and image
 * assets past their retention, files first, once no upload grant or finalization lease of theirs is
 * outstanding (server-shared/images.ts `duePurge`). Several sidecars may run it at once: every step
 * is idempotent.
 */
import type { Pool } from "@neondatabase/serverless";
import { poolDb } from "../../server-shared/db.ts";
import { ImageAssetStore } from "../../server-shared/images.ts";
import type { BatchStore } from "../../server-shared/jobs/batches.ts";
import type { JobStore } from "../../server-shared/jobs/store.ts";
import { deleteUsageBefore } from "../usage.ts";
import { deleteObject, type EdgeLink } from "./grants.ts";
import { loggable } from "../../server-shared/errors.ts";

export interface Retention {
  dataMs: number;
  metadataMs: number;
}

/** Jobs (and image assets) cleaned per run, so that one run stays short. */
const PURGE_BATCH = 100;

/** A kind's inputs read no more, then its jobs terminal for `dataMs` (or ended where nothing is served). */
export async function cleanJobs<T>(store: JobStore<T>, dataMs: number, edge: EdgeLink, log: (line: string) => void): Promise<void> {
  const failed = (id: string, err: unknown) =>
    log(`sidecar: cleanup of ${store.kind.table} row ${id} failed, retried next run: ${loggable(err)}`);
  for (const job of await store.dueInputDeletion(PURGE_BATCH)) {
    try {
      await deleteObject(edge, job.objectKey);
      await store.inputDeleted(job.id);
    } catch (err) {
      failed(job.id, err);
    }
  }
  for (const job of await store.duePurge(dataMs, PURGE_BATCH)) {
    try {
      // The object first: a job marked purged never keeps its input behind.
      await deleteObject(edge, job.objectKey);
      await store.purge(job.id);
    } catch (err) {
      failed(job.id, err);
    }
  }
}

/** Usage rows and purged batches' metadata past `metadataMs`; image assets past their retention. */
export async function runCleanup(store: BatchStore, pool: Pool, edge: EdgeLink, retention: Retention, log: (line: string) => void): Promise<void> {
  await deleteUsageBefore(pool, retention.metadataMs);
  await store.deleteMetadata(retention.metadataMs);
  const images = new ImageAssetStore(poolDb(pool));
  for (const asset of await images.duePurge(PURGE_BATCH)) {
    try {
      for (const object of asset.objects) await deleteObject(edge, object);
      await images.purge(asset.id);
    } catch (err) {
      log(`sidecar: cleanup of image asset ${asset.id} failed, retried next run: ${loggable(err)}`);
    }
  }
}
