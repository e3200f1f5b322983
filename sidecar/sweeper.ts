/**
 * The GPU host's housekeeping (runs in the sidecar beside the job workers, which only claim and
 * step): every SWEEP_EVERY_MS, batches and trainings past their deadline expire, a running batch
 * whose records are all done completes (its worker died between its last commit and the
 * completion), and image credit held past its expiry is given back (an edge died between reserving
 * and settling); at most once per `cleanupEveryMs`, retention cleanup of batches and trainings (their
 * inputs read no more at once, their data after its period), usage rows and image assets (bulk/cleanup.ts),
 * and webhook deliveries finished WEBHOOK_LIMITS.deliveryRetentionMs ago. Several sidecars may sweep at once: every step is
 * idempotent, and none decides what a job commits (its claim's fence does).
 *
 *     const sweeper = new Sweeper({ pool, edge, timing: SWEEPER_TIMING });
 *     sweeper.start();
 *     await sweeper.stop();   // the sweep in flight finishes first
 */
import type { Pool } from "@neondatabase/serverless";
import { LIMITS } from "../contract/limits.ts";
import { WEBHOOK_LIMITS } from "../contract/webhooks.ts";
import { CreditStore } from "../server-shared/credit.ts";
import { poolDb } from "../server-shared/db.ts";
import { BatchStore } from "../server-shared/jobs/batches.ts";
import { TrainingStore } from "../server-shared/jobs/trainings.ts";
import { cleanJobs, runCleanup, type Retention } from "./bulk/cleanup.ts";
import type { EdgeLink } from "./bulk/grants.ts";
import { Periodic } from "./periodic.ts";

/** How often expiry, completion and the credit sweep run. */
export const SWEEP_EVERY_MS = 5000;
/** Expired image-credit reservations released per run. */
const PER_RUN = 100;

export interface SweeperTiming {
  /** Retention cleanup runs at most this often. */
  cleanupEveryMs: number;
  /** Batch data and metadata retention. */
  retention: Retention;
  /** Training data is deleted this long after its job ended. */
  trainingDataMs: number;
}

export const SWEEPER_TIMING: SweeperTiming = {
  cleanupEveryMs: LIMITS.cleanupIntervalMs,
  retention: { dataMs: LIMITS.bulkDataRetentionMs, metadataMs: LIMITS.batchMetadataRetentionMs },
  trainingDataMs: LIMITS.trainingDataRetentionMs,
};

export interface SweeperDeps {
  pool: Pool;
  edge: EdgeLink;
  timing?: SweeperTiming;
  log?: (line: string) => void;
}

export class Sweeper {
  private readonly timing: SweeperTiming;
  private readonly log: (line: string) => void;
  private readonly batches: BatchStore;
  private readonly trainings: TrainingStore;
  private readonly credit: CreditStore;
  private lastCleanup = 0;
  private readonly loop: Periodic;

  constructor(private readonly deps: SweeperDeps) {
    this.timing = deps.timing ?? SWEEPER_TIMING;
    this.log = deps.log ?? ((line) => console.error(line));
    const db = poolDb(deps.pool);
    this.batches = new BatchStore(db);
    this.trainings = new TrainingStore(db);
    this.credit = new CreditStore(db);
    this.loop = new Periodic("sidecar: sweeper", SWEEP_EVERY_MS, async () => {
      await this.sweep();
      return false;
    }, this.log);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One sweep: expiry, completion and credit every time; retention cleanup once per interval. */
  async sweep(): Promise<void> {
    await this.batches.expire();
    await this.batches.completeFinished();
    await this.trainings.expire();
    await this.credit.releaseExpired(PER_RUN);
    if (Date.now() - this.lastCleanup < this.timing.cleanupEveryMs) return;
    this.lastCleanup = Date.now();
    await cleanJobs(this.batches, this.timing.retention.dataMs, this.deps.edge, this.log);
    await cleanJobs(this.trainings, this.timing.trainingDataMs, this.deps.edge, this.log);
    await runCleanup(this.batches, this.deps.pool, this.deps.edge, this.timing.retention, this.log);
    await this.deps.pool.query(
      "DELETE FROM webhook_deliveries WHERE status <> 'pending' AND finished_at <= now() - make_interval(secs => $1::double precision / 1000)",
      [WEBHOOK_LIMITS.deliveryRetentionMs],
    );
  }
}
