/**
 * The job store: the lifecycle every kind of job shares, written once. A job is long-running work
 * an account creates, uploads an input file for, submits, and GPU hosts run under leases, sharing
 * one queue through Postgres with no coordinator. Batches (batches.ts) and trainings (trainings.ts)
 * are two kinds; a kind is a table with these columns, and the kind's own store adds only what
 * differs (its records and results; its examples, acceptance and activation):
 *
 *   id uuid, account_id uuid, status text, idempotency_key text, object_key text, input_bytes bigint,
 *   error jsonb, created_at, submitted_at, started_at, finished_at, expires_at, purged_at, input_deleted_at,
 *   lease_token uuid, lease_expires_at, last_claimed_at (timestamptz)
 *
 *   uploading --submit--> queued --claim--> validating --(the kind's steps)--> ... --> a terminal status
 *   any non-terminal --cancel--> cancelled;  a held job --fail--> failed;  past its deadline --expire--> expired
 *
 * - **Create** runs under the account's row lock with the kind's quota as a condition, so concurrent
 *   creates (any key, any edge) cannot both take the last slot; a repeated idempotency key finds the
 *   job it made.
 * - **Claim** leases the open job that waited longest for a turn (never one leased to another worker,
 *   past its deadline or of a disabled account); a queued job becomes `validating`. The worker renews
 *   the lease while it works and releases it after one step, so jobs and hosts take turns; a crashed
 *   worker's job is claimed again once its lease has expired.
 * - **The fence**: every write of a step presents the lease token and changes nothing unless the lease
 *   is still held and unexpired, the job is not terminal, and its account is active.
 * - **Ending**: cancel, fail and expire clear the lease; the kind's `onEnd` runs in the same statement
 *   as a cancel or an expiry (a training retires the release it registered and never served).
 * - **Retention** is one rule (`duePurge`): a job terminal for the kind's data period, or ended in a
 *   status whose data nothing serves (the kind's `purgeAtOnce`), has its input object and its data
 *   deleted (`purge`), and `purged_at` set; its metadata stays. A job ended in a status whose input
 *   nothing reads again (the kind's `inputAtOnce`) has its input object deleted at the next sweep
 *   (`dueInputDeletion`, `inputDeleted`), its data kept for the period.
 *
 *     const store = new JobStore(KIND, httpDb(sql));
 *     const outcome = await store.create({ id, accountId, idempotencyKey });   // {job, created} | {job: null, quota}
 *     const claimed = await store.claim(leaseMs);                             // {lease, row} or null
 *     await db.query(sql`UPDATE ${raw(KIND.table)} SET ... WHERE ${store.fence(lease)}`);
 *     await store.release(lease);
 */
import { z } from "zod";
import { joined, raw, sql, type Db, type Row, type Sql } from "../db.ts";

export interface JobKind<T> {
  /** The job table. */
  table: string;
  /**
   * The kind's status rules, SQL functions of a status (schema.sql): `terminal`, the statuses a job
   * never leaves; `open`, those a worker may claim it in.
   */
  statuses: { terminal: string; open: string };
  /** The select list a job is read with (its own subqueries name the table, not an alias). */
  columns: string;
  /** Parses a row read with `columns`. */
  parse: (row: unknown) => T;
  /** Where a job's input file is stored. */
  objectKey: (id: string) => string;
  /** How long a job may take from its creation. */
  lifetimeMs: number;
  /**
   * The account's quota for a create: `allows` is a condition on the account's row `a`, `state` the
   * columns that explain a refusal; both may use `active` (the account's jobs not terminal) and `kept`
   * (its jobs whose data is not purged), pieces of SQL with their own parameters.
   */
  quota: (counts: { active: Sql; kept: Sql }) => { allows: Sql; state: Sql };
  /** A statement run in the same statement as a cancel or an expiry, over the ended jobs `ended` (their full rows). */
  onEnd?: string;
  /** The kind's data tables, deleted at purge: each names its job column. */
  data: readonly { table: string; job: string }[];
  /** Terminal statuses whose data nothing serves afterwards: purged at the next sweep, not after the data period. */
  purgeAtOnce?: readonly string[];
  /** Terminal statuses whose input file nothing reads afterwards (their data may still be served): the file goes at the next sweep. */
  inputAtOnce?: readonly string[];
}

/** The window over which a running job's rate (records, examples per minute) is measured. */
export const PROGRESS_WINDOW_MINUTES = 5;

/** A held claim on one job: the token every fenced write presents. */
export interface Lease {
  id: string;
  token: string;
}

/** A kind's extra columns at create: column names are the code's, values parameters. */
export type Columns = Record<string, unknown>;

/** What a submit freezes: column name (the code's) = a piece of SQL over the job's row, which is the kind's table, unaliased. */
export type Frozen = Record<string, Sql>;

export type CreateOutcome<T> = { job: T; created: boolean } | { job: null; quota: Row };

const NAME = /^[a-z_][a-z0-9_]*$/;

const list = (values: readonly string[]) => `(${values.map((v) => `'${v}'`).join(", ")})`;

export class JobStore<T> {
  constructor(
    readonly kind: JobKind<T>,
    protected readonly db: Db,
  ) {
    // Names and statuses are written into SQL text: constants of the code, never input.
    const names = [
      kind.table,
      kind.statuses.terminal,
      kind.statuses.open,
      ...(kind.purgeAtOnce ?? []),
      ...(kind.inputAtOnce ?? []),
      ...kind.data.flatMap((d) => [d.table, d.job]),
    ];
    if (!names.every((name) => NAME.test(name))) throw new Error(`bad job kind ${JSON.stringify(names)}`);
  }

  /** Whether `status` (a piece of SQL) is terminal: the kind's rule, for its own statements too. */
  terminal(status: Sql): Sql {
    return sql`${raw(this.kind.statuses.terminal)}(${status})`;
  }

  // ---- The edge: an account's jobs ----

  /**
   * Creates the account's job for `idempotencyKey`, or finds the one it made before; refused (`job:
   * null`, the quota's state) when the kind's quota is full. One transaction that first locks the
   * account's row, so concurrent creates are serialized; read committed, so each count includes a
   * concurrent create that went first.
   */
  async create(input: { id: string; accountId: string; idempotencyKey: string; columns?: Columns }): Promise<CreateOutcome<T>> {
    const t = this.kind.table;
    const extra = Object.entries(input.columns ?? {});
    if (!extra.every(([name]) => NAME.test(name))) throw new Error(`bad column in ${JSON.stringify(extra.map(([name]) => name))}`);
    const account = input.accountId;
    const active = sql`(SELECT count(*) FROM ${raw(t)} WHERE account_id = ${account} AND NOT ${this.terminal(sql`status`)})`;
    const kept = sql`(SELECT count(*) FROM ${raw(t)} WHERE account_id = ${account} AND purged_at IS NULL)`;
    const quota = this.kind.quota({ active, kept });
    const names = ["id", "account_id", "idempotency_key", "object_key", "expires_at", ...extra.map(([name]) => name)];
    const values = [
      sql`${input.id}`,
      sql`${input.accountId}`,
      sql`${input.idempotencyKey}`,
      sql`${this.kind.objectKey(input.id)}`,
      sql`now() + make_interval(secs => ${this.kind.lifetimeMs}::double precision / 1000)`,
      ...extra.map(([, value]) => sql`${value}`),
    ];
    const [, inserted = [], state = []] = await this.db.transaction([
      sql`SELECT id FROM accounts WHERE id = ${account} FOR UPDATE`,
      sql`INSERT INTO ${raw(t)} (${raw(names.join(", "))})
          SELECT ${joined(values, ", ")} FROM accounts a
           WHERE a.id = ${account} AND NOT EXISTS (SELECT 1 FROM ${raw(t)} WHERE account_id = ${account} AND idempotency_key = ${input.idempotencyKey}) AND ${quota.allows}
          ON CONFLICT (account_id, idempotency_key) DO NOTHING
          RETURNING id`,
      sql`SELECT ${quota.state}, ${active} AS active, ${kept} AS kept,
                 (SELECT row_to_json(j) FROM (SELECT ${raw(this.kind.columns)} FROM ${raw(t)} WHERE account_id = ${account} AND idempotency_key = ${input.idempotencyKey}) j) AS job
            FROM accounts a WHERE a.id = ${account}`,
    ]);
    const { job, ...rest } = state[0] ?? {};
    if (!job) return { job: null, quota: rest };
    return { job: this.kind.parse(job), created: inserted.length > 0 };
  }

  /** The account's job `id`; null for an unknown id and for another account's job alike. */
  async find(id: string, accountId: string): Promise<T | null> {
    const [row] = await this.db.query(`SELECT ${this.kind.columns} FROM ${this.kind.table} WHERE id = $1 AND account_id = $2`, [id, accountId]);
    return row ? this.kind.parse(row) : null;
  }

  /** One page of the account's jobs, newest first, after the job `after` (an earlier page's last). */
  async list(accountId: string, page: { after: string | undefined; limit: number; status?: string | undefined }): Promise<{ rows: T[]; hasMore: boolean }> {
    const t = this.kind.table;
    const rows = await this.db.query(
      `SELECT ${this.kind.columns} FROM ${t}
        WHERE account_id = $1 AND ($4::text IS NULL OR status = $4)
          AND ($2::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM ${t} WHERE id = $2::uuid AND account_id = $1))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [accountId, page.after ?? null, page.limit + 1, page.status ?? null],
    );
    return { rows: rows.slice(0, page.limit).map((row) => this.kind.parse(row)), hasMore: rows.length > page.limit };
  }

  /**
   * Queues an uploading job with its input's size and what the kind freezes at submit (`frozen`:
   * column = a piece of SQL, which may read the job's row as the kind's table, unaliased). Null when
   * it was no longer uploading (a concurrent submit or cancel went first).
   */
  async submit(id: string, accountId: string, inputBytes: number, frozen: Frozen = {}): Promise<T | null> {
    const set = Object.entries(frozen);
    if (!set.every(([name]) => NAME.test(name))) throw new Error(`bad column in ${JSON.stringify(set.map(([name]) => name))}`);
    const assignments = set.map(([name, value]) => sql`, ${raw(name)} = ${value}`);
    const [row] = await this.db.query(
      sql`UPDATE ${raw(this.kind.table)} SET status = 'queued', submitted_at = now(), input_bytes = ${inputBytes}${joined(assignments, "")}
           WHERE id = ${id} AND account_id = ${accountId} AND status = 'uploading'
           RETURNING ${raw(this.kind.columns)}`,
    );
    return row ? this.kind.parse(row) : null;
  }

  /** Cancels a job that is not terminal, with the kind's `onEnd`; null when it already was (nothing changes). */
  async cancel(id: string, accountId: string): Promise<T | null> {
    const [row] = await this.db.query(
      sql`${this.ending(sql`id = ${id} AND account_id = ${accountId} AND NOT ${this.terminal(sql`status`)}`, "cancelled")} SELECT count(*) AS ended FROM ended`,
    );
    return z.coerce.number().parse(row?.ended ?? 0) > 0 ? this.find(id, accountId) : null;
  }

  // ---- The workers: claims, steps and their fence ----

  /** The fence (schema.sql job_lease_held) as a condition on the kind's table, unaliased: the lease's token, unexpired, a live job, an active account. */
  fence(lease: Lease): Sql {
    const t = raw(this.kind.table);
    return sql`${t}.id = ${lease.id} AND job_lease_held(${t}.lease_token, ${lease.token}::uuid, ${t}.lease_expires_at, ${this.terminal(sql`${t}.status`)}, ${t}.account_id)`;
  }

  /**
   * Leases the claimable job (schema.sql job_claimable) that waited longest for a turn (job_turn),
   * with `where` narrowing the candidates (a piece of SQL over the table aliased `j`). A queued job
   * becomes `validating`. Returns the job's whole row.
   */
  async claim(leaseMs: number, where: Sql = sql`true`): Promise<{ lease: Lease; row: Row } | null> {
    const t = raw(this.kind.table);
    const token = crypto.randomUUID();
    const [row] = await this.db.query(
      sql`UPDATE ${t} SET lease_token = ${token}, lease_expires_at = now() + make_interval(secs => ${leaseMs}::double precision / 1000), last_claimed_at = clock_timestamp(),
                 status = CASE WHEN status = 'queued' THEN 'validating' ELSE status END, started_at = coalesce(started_at, now())
           WHERE id = (
             SELECT j.id FROM ${t} j
              WHERE job_claimable(${raw(this.kind.statuses.open)}(j.status), j.expires_at, j.lease_expires_at, j.account_id) AND (${where})
              ORDER BY job_turn(j.last_claimed_at, j.submitted_at)
              LIMIT 1
              FOR UPDATE OF j SKIP LOCKED)
           RETURNING *`,
    );
    return row ? { lease: { id: z.string().parse(row.id), token }, row } : null;
  }

  /** Extends a held lease; false when it is no longer held (expired and taken, job ended, account disabled). */
  async renew(lease: Lease, leaseMs: number): Promise<boolean> {
    const rows = await this.db.query(
      sql`UPDATE ${raw(this.kind.table)} SET lease_expires_at = now() + make_interval(secs => ${leaseMs}::double precision / 1000) WHERE ${this.fence(lease)} RETURNING id`,
    );
    return rows.length > 0;
  }

  /** Gives a lease back without a commit, so another worker may take the job at once. */
  async release(lease: Lease): Promise<void> {
    await this.db.query(`UPDATE ${this.kind.table} SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_token = $2`, [lease.id, lease.token]);
  }

  /** Ends a held job as `failed` with its error; false (nothing written) when the lease is no longer held. */
  async fail(lease: Lease, error: unknown): Promise<boolean> {
    const rows = await this.db.query(
      sql`UPDATE ${raw(this.kind.table)} SET status = 'failed', error = ${JSON.stringify(error)}, finished_at = now(), lease_token = NULL, lease_expires_at = NULL
           WHERE ${this.fence(lease)} RETURNING id`,
    );
    return rows.length > 0;
  }

  // ---- The sweeper: expiry and retention ----

  /** Ends every job past its deadline as `expired` (what it committed stays), with the kind's `onEnd`; returns how many. */
  async expire(): Promise<number> {
    const [row] = await this.db.query(sql`${this.ending(sql`NOT ${this.terminal(sql`status`)} AND expires_at <= now()`, "expired")} SELECT count(*) AS ended FROM ended`);
    return z.coerce.number().parse(row?.ended ?? 0);
  }

  /**
   * Up to `limit` jobs whose data is due for deletion and not purged yet, oldest first: their ids and
   * input objects. Due: terminal for `dataMs`, or at once in a status of the kind's `purgeAtOnce`.
   */
  async duePurge(dataMs: number, limit: number): Promise<{ id: string; objectKey: string }[]> {
    const atOnce = this.kind.purgeAtOnce?.length ? `status IN ${list(this.kind.purgeAtOnce)} OR ` : "";
    const rows = await this.db.query(
      sql`SELECT id, object_key FROM ${raw(this.kind.table)}
           WHERE ${this.terminal(sql`status`)} AND purged_at IS NULL AND (${raw(atOnce)}finished_at <= now() - make_interval(secs => ${dataMs}::double precision / 1000))
           ORDER BY finished_at LIMIT ${limit}`,
    );
    return rows.map((row) => ({ id: z.string().parse(row.id), objectKey: z.string().parse(row.object_key) }));
  }

  /** Deletes a job's data (its input object is deleted first, by the caller) and sets `purged_at`; its metadata stays. */
  async purge(id: string): Promise<void> {
    await this.db.transaction([
      ...this.kind.data.map((d) => ({ text: `DELETE FROM ${d.table} WHERE ${d.job} = $1`, params: [id] })),
      { text: `UPDATE ${this.kind.table} SET purged_at = now() WHERE id = $1 AND purged_at IS NULL`, params: [id] },
    ]);
  }

  /** Up to `limit` jobs ended in a status of the kind's `inputAtOnce` whose input object is still kept (not purged, not deleted yet), oldest first. */
  async dueInputDeletion(limit: number): Promise<{ id: string; objectKey: string }[]> {
    if (!this.kind.inputAtOnce?.length) return [];
    const rows = await this.db.query(
      `SELECT id, object_key FROM ${this.kind.table}
        WHERE status IN ${list(this.kind.inputAtOnce)} AND purged_at IS NULL AND input_deleted_at IS NULL
        ORDER BY finished_at LIMIT $1`,
      [limit],
    );
    return rows.map((row) => ({ id: z.string().parse(row.id), objectKey: z.string().parse(row.object_key) }));
  }

  /** Records that a job's input object has been deleted (by the caller, first). */
  async inputDeleted(id: string): Promise<void> {
    await this.db.query(`UPDATE ${this.kind.table} SET input_deleted_at = now() WHERE id = $1 AND input_deleted_at IS NULL`, [id]);
  }

  /** Deletes the metadata of purged jobs terminal for `metadataMs`. */
  async deleteMetadata(metadataMs: number): Promise<void> {
    await this.db.query(
      `DELETE FROM ${this.kind.table} WHERE purged_at IS NOT NULL AND finished_at <= now() - make_interval(secs => $1::double precision / 1000)`,
      [metadataMs],
    );
  }

  /** The CTEs that end the jobs matching `where` in `status` (lease cleared) as `ended`, with the kind's `onEnd`. */
  private ending(where: Sql, status: "cancelled" | "expired"): Sql {
    const onEnd = this.kind.onEnd ? sql`, on_end AS (${raw(this.kind.onEnd)})` : sql``;
    return sql`WITH ended AS (
              UPDATE ${raw(this.kind.table)} SET status = ${raw(`'${status}'`)}, finished_at = now(), lease_token = NULL, lease_expires_at = NULL
               WHERE ${where} RETURNING *)${onEnd}`;
  }
}
