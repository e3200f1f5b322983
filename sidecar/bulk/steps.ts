/**
 * The bulk batch's steps (run by the sidecar's job worker, sidecar/jobs/worker.ts, one per GPU host):
 * claims batches with work this sidecar can do, and runs one step of each claim. Every statement is
 * the batch store's (server-shared/jobs/batches.ts), whose lease and fence are the job store's.
 *
 * - The first step of a `queued` batch validates its file (contract/batch-file.ts), read through a
 *   short grant the edge signs; a bad file fails the batch, a good one becomes its records and the
 *   batch runs.
 * - A later step runs one record (records.ts) and commits its result, its usage row and the batch's
 *   counts in one transaction fenced by the claim: a worker whose lease was lost, whose batch was
 *   cancelled or whose account was disabled commits nothing. Each line has one result at most. The
 *   same round trip releases the batch and makes the worker's next claim.
 * - Lookahead: while a record runs, the steps read the record the next claim will most likely give
 *   (the same batch's next one, when no other batch waits for a turn: BatchStore.peekNext) and
 *   prepare it (its checks, quota admission and runtime admission), its passes queued to enter the
 *   bulk lane the moment the running record's are done; the runtime then waits for no database round
 *   trip between records. A prepared record is committed only under the claim that gives it, as any
 *   record is; when that claim names another record (another batch took its turn, the lease was
 *   lost), the prepared one is dropped and runs again when its turn comes (its quota admission then
 *   counts twice: a reservation, unused ones are not refunded).
 *
 *     const worker = new JobWorker([new BulkSteps({ pool, lanes, redis, selfUrl, secrets, edge })], { timing });
 */
import type { Pool } from "@neondatabase/serverless";
import type { Redis } from "@upstash/redis";
import { validateInput } from "../../contract/batch-file.ts";
import { LIMITS } from "../../contract/limits.ts";
import { poolDb } from "../../server-shared/db.ts";
import { BatchStore, type BatchClaim, type ClaimRequest } from "../../server-shared/jobs/batches.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { SecretReader } from "../../server-shared/secrets.ts";
import type { Lanes } from "../lanes.ts";
import type { Steps } from "../decide/steps.ts";
import type { JobSteps, StepTurn } from "../jobs/worker.ts";
import { servedRelease, servedReleaseIds } from "../runtime/registry.ts";
import { readInput, type EdgeLink } from "./grants.ts";
import { errorRecord, frozenRelease, modelOf, processRecord, type Outcome, type RecordContext, type ResultOutcome } from "./records.ts";

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
}

/**
 * How long the list of releases served here is reused: it only decides which work is taken, never
 * what is committed (the fence decides that).
 */
const SERVED_TTL_MS = 1000;

/** The wait after a record's first transient failure; it doubles after the second. */
const TRANSIENT_BACKOFF_MS = 2000;

export class BulkSteps implements JobSteps<BatchClaim> {
  readonly name = "bulk";
  private readonly log: (line: string) => void;
  private served: { at: number; ids: string[] } = { at: 0, ids: [] };
  private readonly entries = new Map<string, RegistryEntry>();
  private readonly store: BatchStore;
  /** The record prepared ahead (lookahead), if any: its batch, and its line and outcome once read. */
  private prepared: Prepared | null = null;
  private stopped = false;

  constructor(private readonly deps: BulkDeps) {
    this.log = deps.log ?? ((line) => console.error(line));
    this.store = new BatchStore(poolDb(deps.pool));
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

  /** Validates a claimed batch's file, or runs its next record and commits it (the commit releases the batch and makes the next claim). */
  async step(claim: BatchClaim, signal: AbortSignal, turn: StepTurn): Promise<{ released: BatchClaim | null } | void> {
    if (claim.status === "validating") return this.validate(claim, signal);
    const committed = await this.runOne(claim, signal, turn);
    // No claim made with the commit: nothing prepared can be the next record.
    if (!committed?.released) this.dropPrepared();
    return committed ?? undefined;
  }

  /** Drops the record prepared ahead: the worker stops. */
  stop(): void {
    this.stopped = true;
    this.dropPrepared();
  }

  private async claimRequest(leaseMs: number): Promise<ClaimRequest> {
    return { leaseMs, served: await this.servedReleases(), self: this.deps.selfUrl };
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

  /** Reads and checks the file; stores its records and starts the batch, or fails it. */
  private async validate(claim: BatchClaim, signal: AbortSignal): Promise<void> {
    const bytes = await readInput(this.deps.edge, claim.objectKey, signal);
    const checked = bytes === null ? ({ ok: false, error: { code: "input_missing", message: "the input file is gone", line: null } } as const) : validateInput(bytes);
    signal.throwIfAborted();
    if (!checked.ok) {
      await this.store.fail(claim, checked.error);
      return;
    }
    const releases = checked.records.map((r) => frozenRelease(claim.models, modelOf(r.body))?.id ?? null);
    await this.store.start(claim, checked.records, releases);
  }

  /**
   * Runs the claimed batch's next record and commits it: bulk_commit_and_claim in schema.sql, one
   * round trip that also releases the lease and makes the worker's next claim (a plain bulk_commit
   * once the worker is stopping). Null when nothing was committed.
   */
  private async runOne(claim: BatchClaim, signal: AbortSignal, turn: StepTurn): Promise<{ released: BatchClaim | null } | null> {
    const next = claim.next;
    if (!next) return null; // nothing this sidecar can run now; the sweeper completes a finished batch
    const { record, attempts: before } = next;
    const entry = next.release && (await this.registryEntry(next.release));
    const ctx = {
      lanes: this.deps.lanes,
      redis: this.deps.redis,
      secrets: this.deps.secrets,
      account: claim.account,
      models: claim.models,
      deadline: claim.deadline,
      steps: this.deps.steps,
    };
    // The record prepared ahead when it is this one; else this record, run now.
    const prepared = await this.takePrepared(claim.id, record.line);
    const running = prepared?.outcome ?? processRecord(ctx, record, entry, signal);
    this.prepareAfter(claim, ctx, entry, record.line, running);
    let outcome: Outcome;
    try {
      outcome = await running;
    } catch (err) {
      // A prepared record's failure that is not this step's is this step's to retry, once, itself.
      if (!prepared || signal.aborted) throw err;
      outcome = await processRecord(ctx, record, entry, signal);
    }
    if (outcome.kind === "deadline") return null; // the batch expires; this record stays unfinished
    let result: ResultOutcome;
    if (outcome.kind === "result") result = outcome;
    else {
      const attempts = before + 1;
      if (attempts < LIMITS.bulkTransientAttempts) {
        await this.store.retryLater(claim, record.line, attempts, TRANSIENT_BACKOFF_MS);
        this.log(`sidecar: bulk batch ${claim.id} line ${record.line}: attempt ${attempts} failed (${outcome.reason}); it will be tried again`);
        return null;
      }
      result = errorRecord(record, outcome.code, `the model runtime failed ${attempts} times on this record; retry it in a new batch`);
    }
    signal.throwIfAborted();
    const commit = { record, text: result.text, usage: result.usage };
    // A stopping worker makes no next claim.
    const released = await this.store.commit(claim, commit, turn.stopping() ? undefined : await this.claimRequest(turn.leaseMs));
    this.deps.committed?.(result.usage ? "answered" : "error");
    return { released };
  }

  /**
   * Reads the record after `line` that the next claim will most likely give (BatchStore.peekNext) and
   * prepares it while `running` runs: its checks, quota admission and runtime admission now, its
   * passes queued for the bulk lane once `running` has settled (so they never overtake it).
   */
  private prepareAfter(claim: BatchClaim, ctx: RecordContext, entry: RegistryEntry | null, line: number, running: Promise<Outcome>): void {
    this.dropPrepared();
    if (!entry || this.stopped) return;
    const abort = new AbortController();
    const settled = running.then(
      () => undefined,
      () => undefined,
    );
    const lanes: RecordContext["lanes"] = {
      run: async (lane, work, signal) => {
        await settled;
        return ctx.lanes.run(lane, work, signal);
      },
    };
    const ready = (async () => {
      const after = await this.store.peekNext(claim.id, line, await this.servedReleases());
      // A record on another release (or on none) is left to its own turn.
      if (!after || after.releaseId !== entry.id || abort.signal.aborted) return null;
      const outcome = processRecord({ ...ctx, lanes }, after.record, entry, abort.signal);
      outcome.catch(() => undefined); // awaited by the step that takes it, or dropped
      return { line: after.record.line, outcome };
    })().catch(() => null);
    this.prepared = { batchId: claim.id, abort, ready };
  }

  /** The outcome prepared for `line` of `batchId`, when that is what was prepared; anything else prepared is dropped. */
  private async takePrepared(batchId: string, line: number): Promise<{ outcome: Promise<Outcome> } | null> {
    const prepared = this.prepared;
    this.prepared = null;
    if (!prepared) return null;
    const ready = prepared.batchId === batchId ? await prepared.ready : null;
    if (ready && ready.line === line) return ready;
    this.drop(prepared);
    return null;
  }

  private dropPrepared(): void {
    this.drop(this.prepared);
    this.prepared = null;
  }

  /** Stops a prepared record's work (a waiting lane entry leaves at once; a running pass finishes unused). */
  private drop(prepared: Prepared | null): void {
    prepared?.abort.abort(new Error("the prepared record was not the next claim's"));
  }
}

/** A record prepared ahead: the batch it belongs to, and its line and outcome once the peek has read it (null: nothing to prepare). */
interface Prepared {
  batchId: string;
  abort: AbortController;
  ready: Promise<{ line: number; outcome: Promise<Outcome> } | null>;
}

