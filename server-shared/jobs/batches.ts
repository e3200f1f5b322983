/**
 * The batch kind of job: a job's lifecycle is the job store's (store.ts: create, find, list, submit,
 * cancel, the lease, fail, expire, purge); this file adds what only a batch has, its records and
 * results, for the edge (results pages) and the sidecar's bulk worker (a claim with its next records,
 * start, commit). Rows are parsed here, once, into typed values.
 *
 *   uploading --submit--> queued --claim--> validating --start--> running --commit(last)--> completed
 *   any non-terminal --cancel--> cancelled; validating --fail--> failed; past its deadline --expire--> expired
 *
 * A batch's claim is a SQL function (bulk_claim_records in schema.sql) that calls the store's rules
 * (job_claimable, job_turn) because it also returns the batch's next records (batch_record_runnable)
 * and follows a claim's commit in the same round trip.
 *
 *     const store = new BatchStore(httpDb(sql));   // or poolDb(pool) in the sidecar
 *     const batch = await store.find(id, accountId);
 *     const claim = await store.claimWork({ leaseMs, served, self, records: 8 });
 */
import { z } from "zod";
import { BatchStatus } from "../../contract/batches.ts";
import { JobError } from "../../contract/jobs.ts";
import type { Usage } from "../../contract/decision.ts";
import { LIMITS } from "../../contract/limits.ts";
import { Column, joined, raw, sql, type Db } from "../db.ts";
import { JobStore, PROGRESS_WINDOW_MINUTES, type Frozen, type JobKind, type Lease } from "./store.ts";

const { time: Time, int: Int } = Column;

/**
 * The releases and aliases an account could use when its batch was submitted ({"releases": {id:
 * fingerprint}, "aliases": {alias: id}}), and `direct`: the releases a record may name by id (every
 * one of `releases` when absent, as batches submitted before keys were limited froze them).
 */
export const FrozenModels = z.object({ releases: z.record(z.string(), z.string()), aliases: z.record(z.string(), z.string()), direct: z.array(z.string()).optional() });
export type FrozenModels = z.infer<typeof FrozenModels>;

const COLUMNS =
  "id, status, idempotency_key, metadata, object_key, total_records, completed_records, failed_records, input_bytes, error, " +
  "created_at, submitted_at, started_at, finished_at, expires_at, purged_at, " +
  `(SELECT count(*) FROM batch_results r WHERE r.batch_id = batches.id AND r.committed_at > now() - interval '${PROGRESS_WINDOW_MINUTES} minutes') AS recent_results`;

/** A batch as the edge reads it. */
export const BatchRow = z.object({
  id: z.string(),
  status: BatchStatus,
  idempotency_key: z.string(),
  metadata: z.record(z.string(), z.string()).nullable(),
  object_key: z.string(),
  total_records: Int,
  completed_records: Int,
  failed_records: Int,
  input_bytes: Int.nullable(),
  error: JobError.nullable(),
  created_at: Time,
  submitted_at: Time.nullable(),
  started_at: Time.nullable(),
  finished_at: Time.nullable(),
  expires_at: Time,
  purged_at: Time.nullable(),
  /** Results committed within the last PROGRESS_WINDOW_MINUTES. */
  recent_results: Int,
});
export type BatchRow = z.infer<typeof BatchRow>;

/** An account's batch quotas and what counts against them, when a create is refused. */
export const QuotaState = z.object({
  max_active_batches: Int.nullable(),
  max_batch_storage_bytes: Int.nullable(),
  active: Int,
  kept: Int,
});
export type QuotaState = z.infer<typeof QuotaState>;

/** A bulk record as stored at validation: its input line, custom id and body text. */
export interface StoredRecord {
  line: number;
  customId: string;
  body: string;
}

/** A `bulk_claim_row` (schema.sql): the claimed batch, and one of its records (none while it is validated). */
const ClaimRow = z.object({
  id: z.string(),
  status: z.enum(["validating", "running"]),
  account_id: z.string(),
  object_key: z.string(),
  expires_at: Time,
  models: FrozenModels.nullable(),
  requests_per_second: Int.nullable(),
  tokens_per_second: Int.nullable(),
  line: Int.nullable(),
  custom_id: z.string().nullable(),
  body: z.string().nullable(),
  attempts: Int.nullable(),
  release_id: z.string().nullable(),
  release_revision: Int.nullable(),
});

/** A held claim on a batch, with the step it is for. */
export interface BatchClaim extends Lease {
  status: "validating" | "running";
  objectKey: string;
  /** The batch's deadline, ms since the epoch. */
  deadline: number;
  models: FrozenModels;
  account: { id: string; requests_per_second: number | null; tokens_per_second: number | null };
  /**
   * A running batch's next records this sidecar can run: consecutive pending ones on one release, at
   * most the claim's `records`, each with its transient failures so far, and the release's registry
   * row revision (null: not served here).
   */
  next: { records: { record: StoredRecord; attempts: number }[]; release: { id: string; revision: number } | null } | null;
}

/** What a record's commit writes: its result text and, for an answer, its release and usage. */
export interface RecordCommit {
  record: StoredRecord;
  text: string;
  usage: { releaseId: string; usage: Usage } | null;
}

/** What the worker's next claim needs: a fresh lease length, the releases served here, this sidecar's address, and how many records it takes at most. */
export interface ClaimRequest {
  leaseMs: number;
  served: string[];
  self: string;
  records: number;
}

export const BATCH_KIND: JobKind<BatchRow> = {
  table: "batches",
  statuses: { terminal: "batch_status_terminal", open: "batch_status_open" },
  columns: COLUMNS,
  parse: (row) => BatchRow.parse(row),
  objectKey: (id) => `batches/${id}/input.jsonl`,
  lifetimeMs: LIMITS.batchLifetimeMs,
  quota: ({ active, kept }) => ({
    allows: sql`(a.max_active_batches IS NULL OR a.max_active_batches > ${active})
         AND (a.max_batch_storage_bytes IS NULL OR a.max_batch_storage_bytes >= ${LIMITS.batchStorageReservationBytes}::bigint * (1 + ${kept}))`,
    state: sql`a.max_active_batches, a.max_batch_storage_bytes`,
  }),
  data: [
    { table: "batch_results", job: "batch_id" },
    { table: "batch_records", job: "batch_id" },
  ],
  // What such a batch committed stays readable for the data period; its input file is read no more.
  inputAtOnce: ["cancelled", "failed", "expired"],
};

/**
 * What a submit by key `submitKey` freezes: the releases and aliases the account may use now are the
 * ones the batch runs on, whatever moves later, and the batch's usage is that key's. A key limited to
 * some model names (contract/keys.ts) narrows them, the creating key's and the submitting key's both:
 * a batch may use only what each of them could use itself in a real-time decision (the aliases both
 * may name, and by id only the releases both may name by id), so no key does more through another
 * key's batch than it could do alone. A record naming any other model is answered model_not_found.
 */
export function batchFrozen(accountId: string, submitKey: string): Frozen {
  const usable = sql`r.retired_at IS NULL AND (r.owners IS NULL OR ${accountId}::uuid = ANY (r.owners)) AND (r.training_id IS NULL OR r.sidecar_url IS NOT NULL)`;
  // Scalar arrays (the cast keeps `= ANY (...)` from reading the subquery as a set of rows). The
  // creating key is the batch's row's (the submit's UPDATE reads it as `batches`).
  const keyLimits = [sql`(SELECT ak.models FROM api_keys ak WHERE ak.id = batches.created_by_key)::text[]`, sql`(SELECT ak.models FROM api_keys ak WHERE ak.id = ${submitKey})::text[]`];
  /** Whether both keys may name `name` (a key of no list names anything). */
  const bothMayName = (name: string) => joined(keyLimits.map((models) => sql`(${models} IS NULL OR ${raw(name)} = ANY (${models}))`), " AND ");
  const aliased = sql`EXISTS (SELECT 1 FROM model_aliases ka WHERE ka.release_id = r.id AND ${bothMayName("ka.alias")})`;
  return {
    models: sql`jsonb_build_object(
      'releases', (SELECT coalesce(jsonb_object_agg(r.id, r.fingerprint), '{}') FROM model_releases r WHERE ${usable} AND (${bothMayName("r.id")} OR ${aliased})),
      'aliases', (SELECT coalesce(jsonb_object_agg(m.alias, m.release_id), '{}') FROM model_aliases m JOIN model_releases r ON r.id = m.release_id
                   WHERE ${usable} AND ${bothMayName("m.alias")}),
      'direct', (SELECT coalesce(jsonb_agg(r.id ORDER BY r.id), '[]') FROM model_releases r WHERE ${usable} AND ${bothMayName("r.id")}))`,
    submitted_by_key: sql`${submitKey}`,
  };
}

export class BatchStore extends JobStore<BatchRow> {
  constructor(db: Db) {
    super(BATCH_KIND, db);
  }

  // ---- The edge: a batch's results ----

  /** Up to `limit` committed results after input line `after`, in input order, each the exact text committed. */
  async results(id: string, after: number, limit: number): Promise<{ line: number; text: string }[]> {
    const rows = await this.db.query("SELECT line, result::text AS result FROM batch_results WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3", [id, after, limit]);
    return rows.map((row) => ({ line: Int.parse(row.line), text: z.string().parse(row.result) }));
  }

  // ---- The bulk worker: claims, steps and commits under a lease ----

  /**
   * Leases the batch that waited longest for a turn and has work this worker can do
   * (bulk_claim_records in schema.sql: a queued batch to validate, or a running batch's next records on
   * a release served here); a queued batch becomes `validating`. Null: nothing to do.
   */
  async claimWork(request: ClaimRequest): Promise<BatchClaim | null> {
    const token = crypto.randomUUID();
    const rows = await this.db.query("SELECT * FROM bulk_claim_records($1, $2, $3, $4, $5)", [token, request.leaseMs, request.served, request.self, request.records]);
    return claimOf(token, rows);
  }

  /**
   * The records the worker's next claim of at most `records` will most likely give it while it runs
   * the records up to `line` of `batchId`: the batch's next records as bulk_claim_records would choose
   * them, past `line`, consecutive ones on one release, read without a lease; null when there is
   * none, or when another batch is waiting for a turn (the claim gives that one the next turn). Only a
   * guess: the commit's claim decides, and records prepared on a wrong guess are dropped
   * (sidecar/bulk/read-ahead.ts).
   */
  async peekNext(batchId: string, line: number, served: string[], records: number): Promise<{ records: StoredRecord[]; releaseId: string | null } | null> {
    const rows = await this.db.query(
      sql`SELECT r.line, r.custom_id, r.body, r.release_id FROM batch_records r
           WHERE r.batch_id = ${batchId} AND r.line > ${line} AND batch_record_runnable(r.done, r.not_before, r.release_id, ${served}::text[])
             AND NOT EXISTS (
               SELECT 1 FROM batches c
                WHERE c.id <> ${batchId} AND job_claimable(batch_status_open(c.status), c.expires_at, c.lease_expires_at, c.account_id))
           ORDER BY r.line LIMIT ${Math.max(1, records)}`,
    );
    const parsed = oneRelease(rows.map((row) => z.object({ line: Int, custom_id: z.string(), body: z.string(), release_id: z.string().nullable() }).parse(row)));
    if (parsed.length === 0) return null;
    return { records: parsed.map((row) => ({ line: row.line, customId: row.custom_id, body: row.body })), releaseId: parsed[0]!.release_id };
  }

  /**
   * A validated file's records stored, the batch running and its lease released (any sidecar that
   * serves its records may claim them now), in one fenced statement: all happen, or (the claim lost)
   * none. `releases[i]` is the release record i's model resolved to (null: none).
   */
  async start(claim: Lease, records: StoredRecord[], releases: (string | null)[]): Promise<boolean> {
    const [row] = await this.db.query(
      sql`WITH started AS (
            UPDATE batches SET status = 'running', total_records = ${records.length}, lease_token = NULL, lease_expires_at = NULL
             WHERE ${this.fence(claim)} RETURNING id),
          stored AS (
            INSERT INTO batch_records (batch_id, line, custom_id, body, release_id)
            SELECT started.id, r.* FROM started,
                   unnest(${records.map((r) => r.line)}::int[], ${records.map((r) => r.customId)}::text[], ${records.map((r) => r.body)}::text[], ${releases}::text[]) AS r
            ON CONFLICT DO NOTHING)
          SELECT count(*) AS started FROM started`,
    );
    return Int.parse(row?.started) > 0;
  }

  /**
   * Counts a transient failure of a record under the fence (so a crash cannot grant it more
   * attempts), and makes the batch's other records on that release wait too, `backoffMs` doubled
   * per attempt: while a runtime restarts, they would only use up their own attempts.
   */
  async retryLater(claim: Lease, line: number, attempts: number, backoffMs: number): Promise<void> {
    // The failed record's own wait is set where its attempts are: a statement updates a row once, so
    // the outer UPDATE would silently skip it.
    const wait = sql`now() + make_interval(secs => ${backoffMs}::double precision / 1000 * power(2, ${attempts}::int - 1))`;
    await this.db.query(
      sql`WITH failed AS (
            UPDATE batch_records SET attempts = ${attempts}, not_before = ${wait}
             WHERE batch_id = ${claim.id} AND line = ${line} AND EXISTS (SELECT 1 FROM batches WHERE ${this.fence(claim)})
             RETURNING release_id)
          UPDATE batch_records r SET not_before = ${wait}
            FROM failed WHERE r.batch_id = ${claim.id} AND r.line <> ${line} AND NOT r.done AND r.release_id IS NOT DISTINCT FROM failed.release_id`,
    );
  }

  /**
   * Commits a claim's records' results together (bulk_commit_records in schema.sql: fenced, once per
   * line, each answer with its usage row, and the batch's counts; the last record completes the batch)
   * and releases the lease. With `next`, the same round trip makes the worker's next claim
   * (bulk_commit_records_and_claim).
   */
  async commit(claim: Lease, commits: RecordCommit[], next?: ClaimRequest): Promise<BatchClaim | null> {
    const params = [
      claim.id,
      claim.token,
      commits.map((c) => c.record.line),
      commits.map((c) => c.record.customId),
      commits.map((c) => c.text),
      commits.map((c) => c.usage?.releaseId ?? null),
      commits.map((c) => c.usage?.usage.input_tokens ?? null),
      commits.map((c) => c.usage?.usage.output_tokens ?? null),
      commits.map((c) => c.usage?.usage.billable_input_tokens ?? null),
    ];
    const types = "$3::integer[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::integer[], $9::integer[]";
    if (!next) {
      await this.db.query(`SELECT bulk_commit_records($1, $2, ${types})`, params);
      return null;
    }
    const token = crypto.randomUUID();
    const rows = await this.db.query(`SELECT * FROM bulk_commit_records_and_claim($1, $2, ${types}, $10, $11, $12, $13, $14)`, [
      ...params,
      token,
      next.leaseMs,
      next.served,
      next.self,
      next.records,
    ]);
    return claimOf(token, rows);
  }

  /** Completes a running batch whose last commit was not followed by its completion (a crash in between). */
  async completeFinished(): Promise<void> {
    await this.db.query(
      `UPDATE batches b SET status = 'completed', finished_at = now()
        WHERE status = 'running' AND lease_free(lease_expires_at)
          AND NOT EXISTS (SELECT 1 FROM batch_records r WHERE r.batch_id = b.id AND NOT r.done)`,
    );
  }

}

/** The leading rows on the same release as the first: a claim's records run on one release. */
function oneRelease<T extends { release_id: string | null }>(rows: T[]): T[] {
  const first = rows[0];
  if (!first) return [];
  const other = rows.findIndex((row) => row.release_id !== first.release_id);
  return other === -1 ? rows : rows.slice(0, other);
}

function claimOf(token: string, raw: Record<string, unknown>[]): BatchClaim | null {
  if (raw.length === 0) return null;
  const rows = oneRelease(raw.map((row) => ClaimRow.parse(row)));
  const row = rows[0]!;
  for (const r of rows) {
    if (r.line !== null && (r.custom_id === null || r.body === null)) throw new Error(`bulk_claim_records returned line ${r.line} of batch ${r.id} without its record`);
  }
  const records = row.line === null ? [] : rows.map((r) => ({ record: { line: r.line!, customId: r.custom_id!, body: r.body! }, attempts: r.attempts ?? 0 }));
  return {
    id: row.id,
    token,
    status: row.status,
    objectKey: row.object_key,
    deadline: Date.parse(row.expires_at),
    models: row.models ?? { releases: {}, aliases: {} },
    account: { id: row.account_id, requests_per_second: row.requests_per_second, tokens_per_second: row.tokens_per_second },
    next:
      records.length === 0
        ? null
        : {
            records,
            release: row.release_id !== null && row.release_revision !== null ? { id: row.release_id, revision: row.release_revision } : null,
          },
  };
}
