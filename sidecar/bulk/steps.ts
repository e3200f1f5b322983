/**
 * The bulk batch's steps (run by the sidecar's job worker, sidecar/jobs/worker.ts, one per GPU host):
 * claims batches with work this sidecar can do, and runs one step of each claim. Every statement is
 * the batch store's (server-shared/jobs/batches.ts), whose lease and fence are the job store's.
 *
 * - The first step of a `queued` batch validates its file (contract/batch-file.ts), read through a
 *   short grant the edge signs; a bad file fails the batch, a good one becomes its records and the
 *   batch runs, released at once; the other sidecars that serve its records are woken (an idle
 *   worker would find them at its next poll, sidecar/jobs/worker.ts).
 * - A later step runs the claim's records (records.ts: consecutive ones of the batch on one release,
 *   as one bulk-lane execution) and commits their results, usage rows and the batch's counts in one
 *   transaction fenced by the claim: a worker whose lease was lost, whose batch was cancelled or whose
 *   account was disabled commits nothing. Each line has one result at most. The same round trip
 *   releases the batch and makes the worker's next claim.
 * - How many records a claim takes: as many as fill about LIMITS.bulkExecutionMs of runtime time,
 *   from the time the last executions took per record (ClaimSize), at most LIMITS.bulkClaimRecords.
 *   A pass of a CPU runtime (about 100 ms) makes that one record per execution; millisecond passes
 *   on a GPU make it several, so the runtime does not wait for a lane handover and a commit per
 *   record. Real time does not wait for a whole claim: an execution starts no further record once a
 *   real-time execution waits for the lane (records.ts), and the rest run in the next bulk execution.
 * - Lookahead: while a claim's records run, the steps read the records the next claim will most
 *   likely give (the same batch's next ones, when no other batch waits for a turn: BatchStore.peekNext)
 *   and prepare them (their checks, quota admissions and runtime admissions), queued to enter the
 *   bulk lane the moment the running execution has started its last record (records.ts BulkFlow), so
 *   that their passes follow its last ones at the runtime: the runtime then waits neither for a
 *   database round trip nor for a lane handover between executions. Prepared records are committed only under the claim that gives
 *   them, as any record is; when that claim names other records (another batch took its turn, the
 *   lease was lost), the prepared ones are dropped and run again when their turn comes (their quota
 *   admissions then count twice: reservations, unused ones are not refunded).
 *
 *     const worker = new JobWorker([new BulkSteps({ pool, lanes, redis, selfUrl, secrets, edge })], { timing });
 */
import type { Pool } from "@neondatabase/serverless";
import type { Redis } from "@upstash/redis";
import { validateInput } from "../../contract/batch-file.ts";
import { LIMITS } from "../../contract/limits.ts";
import { poolDb } from "../../server-shared/db.ts";
import { BatchStore, type BatchClaim, type ClaimRequest, type RecordCommit, type StoredRecord } from "../../server-shared/jobs/batches.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { SecretReader } from "../../server-shared/secrets.ts";
import type { Lanes } from "../lanes.ts";
import type { Steps } from "../decide/steps.ts";
import type { JobSteps, StepTurn } from "../jobs/worker.ts";
import { servedRelease, servedReleaseIds } from "../runtime/registry.ts";
import { loggable } from "../../server-shared/errors.ts";
import { sidecarsToWake, wakeSidecars } from "../../server-shared/wake.ts";
import { readInput, type EdgeLink } from "./grants.ts";
import { BulkFlow, errorRecord, frozenRelease, modelOf, processRecords, type Outcome, type RecordContext, type RecordsExecution } from "./records.ts";

export interface BulkDeps {
  pool: Pool;
  lanes: Lanes;
  redis: Redis | null;
  /** This sidecar's SIDECAR_URL: it runs records of the releases the registry assigns to it. */
  selfUrl: string;
  /** The runtime secrets, by the name a registry entry's `token_env` gives. */
  secrets: SecretReader;
  edge: EdgeLink;
  /** The readout's steps (SERVED_STEPS by default). */
  steps?: Steps;
  log?: (line: string) => void;
  /** Told of each record committed (the sidecar's svc_bulk_records_total). */
  committed?: (outcome: "answered" | "error") => void;
  /** The background passes at the runtime, shared with the training worker (records.ts BulkFlow); its own when absent. */
  flow?: BulkFlow;
  /** How many records a claim takes (a fixed size in tests: SVC_TEST_BULK_CLAIM_RECORDS). */
  claimSize?: Pick<ClaimSize, "ran" | "records">;
}

/**
 * How long the list of releases served here is reused: it only decides which work is taken, never
 * what is committed (the fence decides that).
 */
const SERVED_TTL_MS = 1000;

/** The wait after a record's first transient failure; it doubles after the second. */
const TRANSIENT_BACKOFF_MS = 2000;

/**
 * How many records a claim takes: enough to fill about LIMITS.bulkExecutionMs of runtime time at the
 * time recent executions took per record (a moving average), one or more, at most
 * LIMITS.bulkClaimRecords. One until an execution has been timed.
 */
export class ClaimSize {
  private msPerRecord: number | null = null;

  /** An execution that took `ms` at the runtime for `records` records. */
  ran(ms: number, records: number): void {
    if (!(records > 0) || !(ms >= 0)) return;
    const sample = ms / records;
    this.msPerRecord = this.msPerRecord === null ? sample : 0.7 * this.msPerRecord + 0.3 * sample;
  }

  records(): number {
    if (this.msPerRecord === null) return 1;
    const fit = Math.floor(LIMITS.bulkExecutionMs / Math.max(this.msPerRecord, 0.1));
    return Math.min(LIMITS.bulkClaimRecords, Math.max(1, fit));
  }
}

/** Every claim of this many records, whatever the executions take (tests: SVC_TEST_BULK_CLAIM_RECORDS). */
export function fixedClaimSize(records: number): Pick<ClaimSize, "ran" | "records"> {
  return { ran: () => undefined, records: () => records };
}

export class BulkSteps implements JobSteps<BatchClaim> {
  readonly name = "bulk";
  private readonly log: (line: string) => void;
  private served: { at: number; ids: string[] } = { at: 0, ids: [] };
  private readonly entries = new Map<string, RegistryEntry>();
  private readonly store: BatchStore;
  /** The records prepared ahead (lookahead), if any: their batch, and their lines and outcomes once read. */
  private prepared: Prepared | null = null;
  private stopped = false;
  private readonly size: Pick<ClaimSize, "ran" | "records">;
  /** The size of the claim the next commit makes: the one the records prepared ahead were read for. */
  private nextClaimRecords: number | null = null;
  /** What this worker's consecutive executions share at the runtime (records.ts BulkFlow), with the training worker's. */
  private readonly flow: BulkFlow;

  constructor(private readonly deps: BulkDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.store = new BatchStore(poolDb(deps.pool));
    this.size = deps.claimSize ?? new ClaimSize();
    this.flow = deps.flow ?? new BulkFlow();
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
    if (claim.status === "validating") return this.validate(claim, signal);
    const committed = await this.runRecords(claim, signal, turn);
    // No claim made with the commit: nothing prepared can be the next claim's.
    if (!committed?.released) this.dropPrepared();
    return committed ?? undefined;
  }

  /** Drops the record prepared ahead: the worker stops. */
  stop(): void {
    this.stopped = true;
    this.dropPrepared();
  }

  /** A claim of the size the records prepared ahead were read for, else of the size the executions' times give now. */
  private async claimRequest(leaseMs: number): Promise<ClaimRequest> {
    const records = this.nextClaimRecords ?? this.size.records();
    return { leaseMs, served: await this.servedReleases(), self: this.deps.selfUrl, records };
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
   * Reads and checks the file; stores its records and starts the batch (which releases it, and wakes
   * the other sidecars that serve its records), or fails it.
   */
  private async validate(claim: BatchClaim, signal: AbortSignal): Promise<{ released: null } | void> {
    const bytes = await readInput(this.deps.edge, claim.objectKey, signal);
    const checked = bytes === null ? ({ ok: false, error: { code: "input_missing", message: "the input file is gone", line: null } } as const) : validateInput(bytes);
    signal.throwIfAborted();
    if (!checked.ok) {
      await this.store.fail(claim, checked.error);
      return;
    }
    const releases = checked.records.map((r) => frozenRelease(claim.models, modelOf(r.body))?.id ?? null);
    if (!(await this.store.start(claim, checked.records, releases))) return;
    // This worker claims again at once; another sidecar's idle worker would wait for its next poll.
    const ids = [...new Set(releases.filter((id) => id !== null))];
    void sidecarsToWake(poolDb(this.deps.pool), { releases: ids, except: this.deps.selfUrl })
      // The secret this sidecar sends is the one every sidecar accepts (the edge's).
      .then((others) => wakeSidecars(others, this.deps.edge.secret(), (line) => this.log(`sidecar: ${line}`)))
      .catch((err) => this.log(`sidecar: waking the sidecars of batch ${claim.id}: ${loggable(err)}`));
    return { released: null };
  }

  /**
   * Runs the claimed batch's next records and commits them: bulk_commit_records_and_claim in
   * schema.sql, one round trip that also releases the lease and makes the worker's next claim (a
   * plain bulk_commit_records once the worker is stopping). Null when nothing was committed.
   */
  private async runRecords(claim: BatchClaim, signal: AbortSignal, turn: StepTurn): Promise<{ released: BatchClaim | null } | null> {
    const next = claim.next;
    if (!next) return null; // nothing this sidecar can run now; the sweeper completes a finished batch
    const records = next.records.map((r) => r.record);
    const entry = next.release && (await this.registryEntry(next.release));
    const ctx = {
      flow: this.flow,
      lanes: this.deps.lanes,
      redis: this.deps.redis,
      secrets: this.deps.secrets,
      account: claim.account,
      models: claim.models,
      deadline: claim.deadline,
      steps: this.deps.steps,
    };
    const ran = (ms: number, n: number) => this.size.ran(ms, n);
    // The records prepared ahead when they are these; else these records, run now.
    const prepared = await this.takePrepared(claim.id, records);
    const running = prepared?.execution ?? processRecords(ctx, records, entry, signal, ran);
    this.prepareAfter(claim, ctx, entry, records.at(-1)!.line, running.leftLane);
    let outcomes: Outcome[];
    try {
      outcomes = await running.outcomes;
    } catch (err) {
      // A failure of records prepared ahead that is not this step's is this step's to retry, once, itself.
      if (!prepared || signal.aborted) throw err;
      outcomes = await processRecords(ctx, records, entry, signal, ran).outcomes;
    }
    const commits: RecordCommit[] = [];
    for (const [i, outcome] of outcomes.entries()) {
      const { record, attempts: before } = next.records[i]!;
      if (outcome.kind === "deadline") continue; // the batch expires; this record stays unfinished
      if (outcome.kind === "result") {
        commits.push({ record, text: outcome.text, usage: outcome.usage });
        continue;
      }
      const attempts = before + 1;
      if (attempts < LIMITS.bulkTransientAttempts) {
        signal.throwIfAborted();
        await this.store.retryLater(claim, record.line, attempts, TRANSIENT_BACKOFF_MS);
        this.log(`sidecar: bulk batch ${claim.id} line ${record.line}: attempt ${attempts} failed (${outcome.reason}); it will be tried again`);
        continue;
      }
      const result = errorRecord(record, outcome.code, `the model runtime failed ${attempts} times on this record; retry it in a new batch`);
      commits.push({ record, text: result.text, usage: null });
    }
    if (commits.length === 0) return null;
    signal.throwIfAborted();
    // A stopping worker makes no next claim.
    const released = await this.store.commit(claim, commits, turn.stopping() ? undefined : await this.claimRequest(turn.leaseMs));
    for (const commit of commits) this.deps.committed?.(commit.usage ? "answered" : "error");
    return { released };
  }

  /**
   * Reads the records after `line` that the next claim will most likely give (BatchStore.peekNext)
   * and prepares them while the running execution runs: their checks, quota admissions and runtime
   * admissions now, their execution queued for the bulk lane once the running one has left it for
   * good (`runningLeft`: all its records started, so this one never overtakes it, and their passes
   * follow its last ones at the runtime). The next claim is made for as many records as were read for.
   */
  private prepareAfter(claim: BatchClaim, ctx: RecordContext, entry: RegistryEntry | null, line: number, runningLeft: Promise<void>): void {
    this.dropPrepared();
    if (!entry || this.stopped) return;
    const abort = new AbortController();
    const lanes: RecordContext["lanes"] = {
      run: async (lane, work, signal) => {
        await runningLeft;
        return ctx.lanes.run(lane, work, signal);
      },
      realtimeWaiting: () => ctx.lanes.realtimeWaiting(),
    };
    const size = this.size.records();
    this.nextClaimRecords = size;
    const ready = (async () => {
      const after = await this.store.peekNext(claim.id, line, await this.servedReleases(), size);
      // Records on another release (or on none) are left to their own turn.
      if (!after || after.releaseId !== entry.id || abort.signal.aborted) return null;
      const execution = processRecords({ ...ctx, lanes }, after.records, entry, abort.signal, (ms, n) => this.size.ran(ms, n));
      execution.outcomes.catch(() => undefined); // awaited by the step that takes them, or dropped
      return { lines: after.records.map((r) => r.line), execution };
    })().catch(() => null);
    this.prepared = { batchId: claim.id, abort, ready };
  }

  /** The execution prepared for exactly `records` of `batchId`, when that is what was prepared; anything else prepared is dropped. */
  private async takePrepared(batchId: string, records: StoredRecord[]): Promise<{ execution: RecordsExecution } | null> {
    const prepared = this.prepared;
    this.prepared = null;
    this.nextClaimRecords = null;
    if (!prepared) return null;
    const ready = prepared.batchId === batchId ? await prepared.ready : null;
    if (ready && ready.lines.length === records.length && ready.lines.every((line, i) => line === records[i]!.line)) return ready;
    this.drop(prepared);
    return null;
  }

  private dropPrepared(): void {
    this.drop(this.prepared);
    this.prepared = null;
    this.nextClaimRecords = null;
  }

  /** Stops prepared records' work (a waiting lane entry leaves at once; passes already sent finish unused). */
  private drop(prepared: Prepared | null): void {
    prepared?.abort.abort(new Error("the prepared record was not the next claim's"));
  }
}

/** Records prepared ahead: the batch they belong to, and their lines and execution once the peek has read them (null: nothing to prepare). */
interface Prepared {
  batchId: string;
  abort: AbortController;
  ready: Promise<{ lines: number[]; execution: RecordsExecution } | null>;
}

