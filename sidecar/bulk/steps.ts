/**
 * The batch kind's steps (run by a sidecar's job worker, sidecar/jobs/worker.ts): claims batches
 * with work this sidecar can do, and runs one step of each claim. Every statement is the batch
 * store's (server-shared/jobs/batches.ts), whose lease and fence are the job store's.
 *
 * - A `validating` batch's step checks its file and starts it, or fails it (validate.ts).
 * - A running batch's step runs the claim's records (records.ts: consecutive ones of the batch on one
 *   release, as one bulk-lane execution) and commits their outcomes, which releases the batch and
 *   makes the worker's next claim in the same round trip (commit.ts).
 * - A claim takes as many records as fill about LIMITS.bulkExecutionMs of runtime time (claim-size.ts).
 *   Real time does not wait for a whole claim: an execution starts no further record once a
 *   real-time execution waits for the lane (records.ts), and the rest run in the next execution.
 * - While a claim's records run, the next claim's likely records are read and prepared (read-ahead.ts).
 *
 *     const worker = new JobWorker(new BulkSteps({ pool, lanes, redis, selfUrl, secrets, edge }), { timing });
 */
import type { Pool } from "@neondatabase/serverless";
import type { Redis } from "@upstash/redis";
import { poolDb } from "../../server-shared/db.ts";
import { BatchStore, type BatchClaim, type ClaimRequest } from "../../server-shared/jobs/batches.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { SecretReader } from "../../server-shared/secrets.ts";
import type { Lanes } from "../lanes.ts";
import type { Steps } from "../decide/steps.ts";
import type { JobSteps, StepTurn } from "../jobs/worker.ts";
import { servedRelease, servedReleaseIds } from "../runtime/registry.ts";
import { ClaimSize, type ClaimSizing } from "./claim-size.ts";
import { commitOutcomes } from "./commit.ts";
import type { EdgeLink } from "./grants.ts";
import { ReadAhead } from "./read-ahead.ts";
import { BackgroundSlots, processRecords, type Outcome, type RecordContext } from "./records.ts";
import { validateBatch } from "./validate.ts";

export interface BulkDeps {
  pool: Pool;
  lanes: Lanes;
  redis: Redis | null;
  /** This sidecar's SIDECAR_URL: it runs records of the releases the registry assigns to it. */
  selfUrl: string;
  /** The runtime secrets, by the name a registry entry's `token_env` gives. */
  secrets: SecretReader;
  edge: EdgeLink;
  steps?: Steps;
  log?: (line: string) => void;
  /** Told of each record committed (the sidecar's svc_bulk_records_total). */
  committed?: (outcome: "answered" | "error") => void;
  /** The background's slots at the runtime, shared with the training worker (records.ts BackgroundSlots); its own when absent. */
  background?: BackgroundSlots;
  /** How many records a claim takes: ClaimSize when absent. */
  claimSize?: ClaimSizing;
}

/**
 * How long the list of releases served here is reused: it only decides which work is taken, never
 * what is committed (the fence decides that).
 */
const SERVED_TTL_MS = 1000;

export class BulkSteps implements JobSteps<BatchClaim> {
  readonly name = "bulk";
  private readonly log: (line: string) => void;
  private served: { at: number; ids: string[] } = { at: 0, ids: [] };
  private readonly entries = new Map<string, RegistryEntry>();
  private readonly store: BatchStore;
  private readonly size: ClaimSizing;
  private readonly readAhead: ReadAhead;
  /** What this worker's consecutive executions share at the runtime, with the training worker's. */
  private readonly background: BackgroundSlots;

  constructor(private readonly deps: BulkDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.store = new BatchStore(poolDb(deps.pool));
    this.size = deps.claimSize ?? new ClaimSize();
    this.background = deps.background ?? new BackgroundSlots();
    this.readAhead = new ReadAhead({ store: this.store, served: () => this.servedReleases(), size: this.size });
  }

  /** Claims the batch that waited longest for a turn and has work this sidecar can do. */
  async claim(leaseMs: number): Promise<BatchClaim | null> {
    return this.store.claimWork(await this.claimRequest(leaseMs));
  }

  renew(claim: BatchClaim, leaseMs: number): Promise<boolean> {
    return this.store.renew(claim, leaseMs);
  }

  release(claim: BatchClaim): Promise<void> {
    return this.store.release(claim);
  }

  /** Validates a claimed batch's file, or runs its next records and commits them (the commit releases the batch and makes the next claim). */
  async step(claim: BatchClaim, signal: AbortSignal, turn: StepTurn): Promise<{ released: BatchClaim | null } | void> {
    if (claim.status === "validating") {
      return validateBatch({ pool: this.deps.pool, store: this.store, edge: this.deps.edge, selfUrl: this.deps.selfUrl, log: this.log }, claim, signal);
    }
    const committed = await this.runRecords(claim, signal, turn);
    // No claim made with the commit: nothing prepared can be the next claim's.
    if (!committed?.released) this.readAhead.drop();
    return committed ?? undefined;
  }

  /** Drops the records prepared ahead: the worker stops. */
  stop(): void {
    this.readAhead.stop();
  }

  private async claimRequest(leaseMs: number): Promise<ClaimRequest> {
    return { leaseMs, served: await this.servedReleases(), self: this.deps.selfUrl, records: this.readAhead.nextClaimRecords() };
  }

  /**
   * The registry entry of a release this sidecar serves, kept by the row revision the claim read (a
   * changed row is read again on its next record); null when it is no longer served here.
   */
  private async registryEntry(release: { id: string; revision: number }): Promise<RegistryEntry | null> {
    const kept = this.entries.get(release.id);
    if (kept && kept.revision === release.revision) return kept;
    const entry = await servedRelease(this.deps.pool, this.deps.selfUrl, release.id);
    if (entry) this.entries.set(entry.id, entry);
    else this.entries.delete(release.id);
    return entry;
  }

  /** The releases the registry assigns to this sidecar, read at most once per `SERVED_TTL_MS`. */
  private async servedReleases(): Promise<string[]> {
    if (Date.now() - this.served.at >= SERVED_TTL_MS) {
      this.served = { at: Date.now(), ids: await servedReleaseIds(this.deps.pool, this.deps.selfUrl) };
    }
    return this.served.ids;
  }

  /**
   * Runs the claimed batch's next records (the ones prepared ahead, when they are these) and commits
   * them, with the worker's next claim unless it is stopping. Null when nothing was committed.
   */
  private async runRecords(claim: BatchClaim, signal: AbortSignal, turn: StepTurn): Promise<{ released: BatchClaim | null } | null> {
    const next = claim.next;
    if (!next) return null; // nothing this sidecar can run now; the sweeper completes a finished batch
    const records = next.records.map((r) => r.record);
    const entry = next.release && (await this.registryEntry(next.release));
    const ctx: RecordContext = {
      background: this.background,
      lanes: this.deps.lanes,
      redis: this.deps.redis,
      secrets: this.deps.secrets,
      account: claim.account,
      models: claim.models,
      deadline: claim.deadline,
      steps: this.deps.steps,
    };
    const ran = (ms: number, n: number) => this.size.ran(ms, n);
    const prepared = await this.readAhead.take(claim.id, records);
    const running = prepared?.execution ?? processRecords(ctx, records, entry, signal, ran);
    this.readAhead.prepareAfter(claim, ctx, entry, records.at(-1)!.line, running.leftLane);
    let outcomes: Outcome[];
    try {
      outcomes = await running.outcomes;
    } catch (err) {
      // A failure of records prepared ahead that is not this step's is this step's to retry, once, itself.
      if (!prepared || signal.aborted) throw err;
      outcomes = await processRecords(ctx, records, entry, signal, ran).outcomes;
    }
    // A stopping worker makes no next claim.
    const nextClaim = async () => (turn.stopping() ? undefined : this.claimRequest(turn.leaseMs));
    return commitOutcomes({ store: this.store, log: this.log, ...(this.deps.committed ? { committed: this.deps.committed } : {}) }, claim, outcomes, nextClaim, signal);
  }
}
