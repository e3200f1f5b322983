/**
 * The bulk worker loop (runs in the sidecar, one per GPU host): claims batches from Postgres with
 * leases, so several sidecars share one queue with no coordinator.
 *
 * - A claim takes one batch (SKIP LOCKED; never one of a disabled account or past its deadline),
 *   lasts `leaseMs` (120 s) and is renewed every `renewMs` (30 s) while held; it does one step, then
 *   releases the batch, so batches and hosts take turns. A crashed worker's batch is claimed again
 *   once its lease has expired.
 * - The first step of a `queued` batch validates its file (validate.ts), read through a short grant
 *   the edge signs; a bad file fails the batch, a good one becomes its records and the batch runs.
 * - A later step runs one record (records.ts) and commits its result, its usage row and the batch's
 *   counts in one transaction fenced by the claim: a worker whose lease was lost, whose batch was
 *   cancelled or whose account was disabled commits nothing. Each line has one result at most. The
 *   same round trip releases the batch and makes the worker's next claim, so the runtime waits for
 *   one database round trip between records.
 * - Every loop also expires batches past their deadline and, at most once a minute, runs retention
 *   cleanup (cleanup.ts).
 *
 *     const worker = new BulkWorker({ pool, lanes, redis, selfUrl, secrets, edge, timing });
 *     worker.start();
 *     await worker.stop({ drain: AbortSignal.timeout(25_000) }); // on SIGTERM: the step in flight may commit until then
 */
import type { Pool, PoolClient } from "@neondatabase/serverless";
import type { Redis } from "@upstash/redis";
import { TERMINAL_STATUSES, type BatchError } from "../../contract/batches.ts";
import { LIMITS } from "../../contract/limits.ts";
import type { Lanes } from "../lanes.ts";
import { runCleanup, type Retention } from "./cleanup.ts";
import { readInput, type EdgeLink } from "./grants.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { SecretReader } from "../../server-shared/secrets.ts";
import { servedRelease } from "../runtime/registry.ts";
import { errorRecord, frozenRelease, modelOf, processRecord, type FrozenModels, type ResultOutcome, type StoredRecord } from "./records.ts";
import { validateInput } from "../../contract/batch-file.ts";

export interface WorkerTiming {
  leaseMs: number;
  renewMs: number;
  /** How long an idle worker waits before looking for work again. */
  idleMs: number;
  cleanupEveryMs: number;
  retention: Retention;
}

export const WORKER_TIMING: WorkerTiming = {
  leaseMs: LIMITS.bulkLeaseMs,
  renewMs: LIMITS.bulkLeaseRenewMs,
  idleMs: 500,
  cleanupEveryMs: LIMITS.cleanupIntervalMs,
  retention: { dataMs: LIMITS.bulkDataRetentionMs, metadataMs: LIMITS.batchMetadataRetentionMs },
};

export interface WorkerDeps {
  pool: Pool;
  lanes: Lanes;
  redis: Redis | null;
  /** This sidecar's SIDECAR_URL: it runs records of the releases the registry assigns to it. */
  selfUrl: string;
  /** The runtime secrets, by the name a registry entry's `token_env` gives. */
  secrets: SecretReader;
  edge: EdgeLink;
  timing?: WorkerTiming;
  log?: (line: string) => void;
}

/** A held claim: the fencing token every write of this step must present. */
interface Claim {
  id: string;
  token: string;
  status: "validating" | "running";
  accountId: string;
  objectKey: string;
  deadline: number;
  models: FrozenModels | null;
  /** A running batch's next record this sidecar can run, with its release's registry entry (null: not served). */
  next: { record: StoredRecord; attempts: number; release: { id: string; revision: number } | null } | null;
  account: { id: string; requests_per_second: number | null; tokens_per_second: number | null };
}

const TERMINAL = `(${TERMINAL_STATUSES.map((s) => `'${s}'`).join(", ")})`;

/** The claim's fence over `batches`: the token, an unexpired lease, a live batch and an active account. */
const fence = (id = "$1", token = "$2") => `batches.id = ${id} AND lease_token = ${token} AND lease_expires_at > now() AND status NOT IN ${TERMINAL}
  AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = batches.account_id AND a.status = 'active')`;
const FENCE = fence();

/**
 * How often expiry and completion housekeeping run, and how long the list of releases served here is
 * reused: both only decide which work is taken, never what is committed (the fence decides that).
 */
const HOUSEKEEPING_EVERY_MS = 5000;
const SERVED_TTL_MS = 1000;

/** The wait after a record's first transient failure; it doubles after the second. */
const TRANSIENT_BACKOFF_MS = 2000;

/** A claim from a `bulk_claim_row` (schema.sql); null when there was none. */
function claimOf(token: string, row: Record<string, unknown> | undefined): Claim | null {
  if (!row) return null;
  const quota = (value: unknown) => (value === null ? null : Number(value));
  return {
    id: String(row.id),
    token,
    status: row.status === "running" ? "running" : "validating",
    accountId: String(row.account_id),
    objectKey: String(row.object_key),
    deadline: new Date(row.expires_at as string).getTime(),
    models: (row.models as FrozenModels | null) ?? null,
    next:
      row.line === null || row.line === undefined
        ? null
        : {
            record: { line: Number(row.line), customId: String(row.custom_id), body: String(row.body) },
            attempts: Number(row.attempts),
            release: row.release_revision === null ? null : { id: String(row.release_id), revision: Number(row.release_revision) },
          },
    account: { id: String(row.account_id), requests_per_second: quota(row.requests_per_second), tokens_per_second: quota(row.tokens_per_second) },
  };
}

export class BulkWorker {
  private readonly timing: WorkerTiming;
  private readonly log: (line: string) => void;
  private stopping = false;
  private loop: Promise<void> | null = null;
  private current: AbortController | null = null;
  private lastCleanup = 0;
  private lastHousekeeping = 0;
  private served: { at: number; ids: string[] } = { at: 0, ids: [] };
  private readonly entries = new Map<string, RegistryEntry>();

  constructor(private readonly deps: WorkerDeps) {
    this.timing = deps.timing ?? WORKER_TIMING;
    this.log = deps.log ?? ((line) => console.error(line));
  }

  start(): void {
    this.loop ??= this.run();
  }

  /**
   * Stops claiming, and renews no lease from now on. Without `drain`, a step in flight is abandoned
   * (nothing of it commits); with it, the step may finish and commit until `drain` aborts, within the
   * lease it holds (at least `leaseMs - renewMs` is left of it). Either way its batch is released.
   */
  async stop(opts: { drain?: AbortSignal } = {}): Promise<void> {
    this.stopping = true;
    const abandon = () => this.current?.abort(new Error("the worker is stopping"));
    if (!opts.drain || opts.drain.aborted) abandon();
    else opts.drain.addEventListener("abort", abandon, { once: true });
    await this.loop;
  }

  private async run(): Promise<void> {
    // A record's commit also makes the next claim (one round trip): it is taken up on the next turn.
    let next: Claim | null = null;
    while (!this.stopping) {
      try {
        await this.housekeeping();
        const claim = next ?? (await this.claim());
        next = null;
        if (!claim) {
          await this.idle();
          continue;
        }
        // A claim made while the worker was told to stop is handed back untouched.
        if (this.stopping) {
          await this.release(claim);
          break;
        }
        next = await this.step(claim);
      } catch (err) {
        // Postgres away, a bug: say so without content, wait, go on. A held lease simply expires.
        if (!this.stopping) this.log(`sidecar: bulk worker: ${err instanceof Error ? err.message : String(err)}`);
        await this.idle();
      }
    }
    if (next) await this.release(next);
  }

  private async idle(): Promise<void> {
    if (!this.stopping) await new Promise((resolve) => setTimeout(resolve, this.timing.idleMs));
  }

  /**
   * Expiry of batches past their deadline; completion of a running batch whose last commit was not
   * followed by its completion (a crash in between); retention cleanup at most once per interval.
   */
  private async housekeeping(): Promise<void> {
    if (Date.now() - this.lastHousekeeping < HOUSEKEEPING_EVERY_MS) return;
    this.lastHousekeeping = Date.now();
    await this.deps.pool.query(
      `UPDATE batches SET status = 'expired', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
        WHERE status NOT IN ${TERMINAL} AND expires_at <= now()`,
    );
    await this.deps.pool.query(
      `UPDATE batches b SET status = 'completed', finished_at = now()
        WHERE status = 'running' AND (lease_expires_at IS NULL OR lease_expires_at <= now())
          AND NOT EXISTS (SELECT 1 FROM batch_records r WHERE r.batch_id = b.id AND NOT r.done)`,
    );
    if (Date.now() - this.lastCleanup >= this.timing.cleanupEveryMs) {
      this.lastCleanup = Date.now();
      await runCleanup(this.deps.pool, this.deps.edge, this.timing.retention, this.log);
    }
  }

  /** Claims the batch that waited longest for a turn and has work this sidecar can do (bulk_claim in schema.sql). */
  private async claim(): Promise<Claim | null> {
    const token = crypto.randomUUID();
    const { rows } = await this.deps.pool.query("SELECT * FROM bulk_claim($1, $2, $3, $4)", [token, this.timing.leaseMs, await this.servedReleases(), this.deps.selfUrl]);
    return claimOf(token, rows[0]);
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
      const { rows } = await this.deps.pool.query("SELECT id FROM model_releases WHERE retired_at IS NULL AND sidecar_url = $1", [this.deps.selfUrl]);
      this.served = { at: Date.now(), ids: rows.map((row) => String(row.id)) };
    }
    return this.served.ids;
  }

  /**
   * One step under the claim, renewing the lease meanwhile; the batch is released afterwards. Returns
   * the next claim when the step's commit made it.
   */
  private async step(claim: Claim): Promise<Claim | null> {
    const abort = new AbortController();
    this.current = abort;
    const renewal = setInterval(() => {
      // A stopping worker keeps the lease it has and renews nothing it might not keep.
      if (this.stopping) return;
      this.deps.pool
        .query(`UPDATE batches SET lease_expires_at = now() + make_interval(secs => $3::double precision / 1000) WHERE ${FENCE}`, [claim.id, claim.token, this.timing.leaseMs])
        .then(({ rowCount }) => {
          // Lost (expired and taken, cancelled, account disabled): stop; nothing of this step commits anyway.
          if (rowCount === 0) abort.abort(new Error("the claim was lost"));
        })
        .catch(() => undefined);
    }, this.timing.renewMs);
    let committed: { next: Claim | null } | null = null;
    try {
      if (claim.status === "validating") await this.validate(claim, abort.signal);
      else committed = await this.runOne(claim, abort.signal);
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    } finally {
      clearInterval(renewal);
      this.current = null;
      if (!committed) await this.release(claim);
    }
    return committed?.next ?? null;
  }

  /** Ends a claim without a commit (the commit releases its own). */
  private async release(claim: Claim): Promise<void> {
    await this.deps.pool
      .query("UPDATE batches SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_token = $2", [claim.id, claim.token])
      .catch(() => undefined);
  }

  /** Reads and checks the file; stores its records and starts the batch, or fails it. */
  private async validate(claim: Claim, signal: AbortSignal): Promise<void> {
    const bytes = await readInput(this.deps.edge, claim.objectKey, signal);
    const checked = bytes === null ? ({ ok: false, error: { code: "input_missing", message: "the input file is gone", line: null } } as const) : validateInput(bytes);
    signal.throwIfAborted();
    if (!checked.ok) {
      await this.finish(claim, "failed", checked.error);
      return;
    }
    const models = claim.models ?? { releases: {}, aliases: {} };
    await this.transaction(async (db) => {
      const { rowCount } = await db.query(`UPDATE batches SET status = 'running', total_records = $3 WHERE ${FENCE}`, [claim.id, claim.token, checked.records.length]);
      if (rowCount === 0) return false;
      await db.query(
        `INSERT INTO batch_records (batch_id, line, custom_id, body, release_id)
         SELECT $1, * FROM unnest($2::int[], $3::text[], $4::text[], $5::text[])
         ON CONFLICT DO NOTHING`,
        [
          claim.id,
          checked.records.map((r) => r.line),
          checked.records.map((r) => r.customId),
          checked.records.map((r) => r.body),
          checked.records.map((r) => frozenRelease(models, modelOf(r.body))?.id ?? null),
        ],
      );
      return true;
    });
  }

  /**
   * Runs the claimed batch's next record and commits it: bulk_commit_and_claim in schema.sql, one
   * round trip that also releases the lease and makes the worker's next claim (a plain bulk_commit
   * once the worker is stopping). Null when nothing was committed.
   */
  private async runOne(claim: Claim, signal: AbortSignal): Promise<{ next: Claim | null } | null> {
    const next = claim.next;
    if (!next) return null; // nothing this sidecar can run now; housekeeping completes a finished batch
    const { record, attempts: before } = next;
    const entry = next.release && (await this.registryEntry(next.release));
    const ctx = {
      lanes: this.deps.lanes,
      redis: this.deps.redis,
      secrets: this.deps.secrets,
      account: claim.account,
      models: claim.models ?? { releases: {}, aliases: {} },
      deadline: claim.deadline,
    };
    const outcome = await processRecord(ctx, record, entry, signal);
    if (outcome.kind === "deadline") return null; // the batch expires; this record stays unfinished
    let result: ResultOutcome;
    if (outcome.kind === "result") result = outcome;
    else {
      const attempts = before + 1;
      if (attempts < LIMITS.bulkTransientAttempts) {
        // Counted under the fence, so a crash cannot grant a record more attempts than three in all.
        // The batch's other records on that release wait too: while a runtime restarts, they would
        // only use up their own attempts.
        await this.deps.pool.query(
          `WITH failed AS (
             UPDATE batch_records SET attempts = $3
              WHERE batch_id = $1 AND line = $2 AND EXISTS (SELECT 1 FROM batches WHERE ${fence("$1", "$4")})
              RETURNING release_id)
           UPDATE batch_records r SET not_before = now() + make_interval(secs => $5::double precision / 1000 * power(2, $3 - 1))
             FROM failed WHERE r.batch_id = $1 AND NOT r.done AND r.release_id IS NOT DISTINCT FROM failed.release_id`,
          [claim.id, record.line, attempts, claim.token, TRANSIENT_BACKOFF_MS],
        );
        this.log(`sidecar: bulk batch ${claim.id} line ${record.line}: attempt ${attempts} failed (${outcome.reason}); it will be tried again`);
        return null;
      }
      result = errorRecord(record, "unavailable", `the model runtime failed ${attempts} times on this record; retry it in a new batch`);
    }
    signal.throwIfAborted();
    const usage = result.usage;
    const commit = [
      claim.id,
      claim.token,
      record.line,
      record.customId,
      result.text,
      usage?.releaseId ?? null,
      usage?.usage.input_tokens ?? null,
      usage?.usage.output_tokens ?? null,
      usage?.usage.billable_input_tokens ?? null,
    ];
    if (this.stopping) {
      await this.deps.pool.query("SELECT bulk_commit($1, $2, $3, $4, $5, $6, $7, $8, $9)", commit);
      return { next: null };
    }
    const token = crypto.randomUUID();
    const { rows } = await this.deps.pool.query("SELECT * FROM bulk_commit_and_claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)", [
      ...commit,
      token,
      this.timing.leaseMs,
      await this.servedReleases(),
      this.deps.selfUrl,
    ]);
    return { next: claimOf(token, rows[0]) };
  }

  private async finish(claim: Claim, status: "failed", error: BatchError): Promise<void> {
    await this.deps.pool.query(`UPDATE batches SET status = $3, error = $4, finished_at = now(), lease_token = NULL, lease_expires_at = NULL WHERE ${FENCE}`, [
      claim.id,
      claim.token,
      status,
      JSON.stringify(error),
    ]);
  }

  /** Runs `work` in one transaction; it commits when `work` returns true and rolls back otherwise. */
  private async transaction(work: (db: PoolClient) => Promise<boolean>): Promise<boolean> {
    const db = await this.deps.pool.connect();
    try {
      await db.query("BEGIN");
      const commit = await work(db);
      await db.query(commit ? "COMMIT" : "ROLLBACK");
      return commit;
    } catch (err) {
      await db.query("ROLLBACK").catch(() => undefined);
      throw err;
    } finally {
      db.release();
    }
  }
}
