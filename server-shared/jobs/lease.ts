/**
 * Leased jobs: long-running work that GPU hosts share through Postgres with no coordinator. Bulk
 * batches are one kind (batches.ts); every kind is a table with these columns, and this module is
 * the one place the lease, its fence and the generic transitions are written:
 *
 *   id uuid, account_id uuid, status text, error jsonb, created_at, expires_at, finished_at,
 *   lease_token uuid, lease_expires_at, last_claimed_at, purged_at (timestamptz), object_key text
 *
 * - A claim sets a fresh `lease_token` and `lease_expires_at`; the worker renews it while it works
 *   and releases it after one step, so jobs and hosts take turns. A crashed worker's job is claimed
 *   again once its lease has expired.
 * - Every write of a step is fenced: it presents the token and changes nothing unless the lease is
 *   still held and unexpired, the job is not terminal, and its account is active. A worker that lost
 *   its lease, whose job was cancelled or whose account was disabled commits nothing.
 * - `fail` and `expire` end a job (`failed`, `expired`); every kind has those two terminal statuses.
 * - Retention is one rule for every kind (`duePurge`): a job terminal for the kind's data period has
 *   its input object and its data deleted, and `purged_at` set; its metadata stays.
 *
 *     const jobs = new LeasedJobs({ table: "trainings", terminal: [...], open: [...] });
 *     const lease = await jobs.claim(db, leaseMs);           // the job that waited longest, or null
 *     const held = await jobs.renew(db, lease, leaseMs);     // false: lost, stop working on it
 *     await db.query(`UPDATE trainings SET ... WHERE ${jobs.fence()}`, [lease.id, lease.token, ...]);
 *     await jobs.release(db, lease);
 */
import { z } from "zod";
import type { Db, Row } from "../db.ts";

export interface JobKind {
  /** The job table. */
  table: string;
  /** Statuses a job never leaves. */
  terminal: readonly string[];
  /** Statuses a worker may claim a job in. */
  open: readonly string[];
}

/** A held claim on one job: the token every fenced write presents. */
export interface Lease {
  id: string;
  token: string;
}

const NAME = /^[a-z_][a-z0-9_]*$/;

const list = (values: readonly string[]) => `(${values.map((v) => `'${v}'`).join(", ")})`;

export class LeasedJobs {
  /** `status IN (...)` of the terminal statuses, for this kind's own statements. */
  readonly terminalSql: string;
  readonly openSql: string;

  constructor(readonly kind: JobKind) {
    // Names and statuses are written into SQL text: constants of the code, never input.
    if (![kind.table, ...kind.terminal, ...kind.open].every((name) => NAME.test(name))) throw new Error(`bad job kind ${JSON.stringify(kind)}`);
    this.terminalSql = list(kind.terminal);
    this.openSql = list(kind.open);
  }

  /** The fence as a condition on the kind's table: the token, an unexpired lease, a live job, an active account. */
  fence(id = "$1", token = "$2"): string {
    const t = this.kind.table;
    return `${t}.id = ${id} AND ${t}.lease_token = ${token} AND ${t}.lease_expires_at > now() AND ${t}.status NOT IN ${this.terminalSql}
      AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = ${t}.account_id AND a.status = 'active')`;
  }

  /**
   * Leases the open job that waited longest for a turn (never one leased to another worker, past its
   * deadline or of a disabled account), with `where` narrowing the candidates (a condition on the
   * table aliased `j`, its parameters numbered from $3). Returns the job's row and the lease.
   */
  async claim(db: Db, leaseMs: number, where = "true", params: unknown[] = []): Promise<{ lease: Lease; row: Row } | null> {
    const t = this.kind.table;
    const token = crypto.randomUUID();
    const [row] = await db.query(
      `UPDATE ${t} SET lease_token = $1, lease_expires_at = now() + make_interval(secs => $2::double precision / 1000), last_claimed_at = clock_timestamp()
        WHERE id = (
          SELECT j.id FROM ${t} j JOIN accounts a ON a.id = j.account_id
           WHERE j.status IN ${this.openSql} AND a.status = 'active' AND j.expires_at > now()
             AND (j.lease_expires_at IS NULL OR j.lease_expires_at <= now()) AND (${where})
           ORDER BY j.last_claimed_at NULLS FIRST, j.created_at
           LIMIT 1
           FOR UPDATE OF j SKIP LOCKED)
        RETURNING *`,
      [token, leaseMs, ...params],
    );
    return row ? { lease: { id: z.string().parse(row.id), token }, row } : null;
  }

  /** Extends a held lease; false when it is no longer held (expired and taken, job ended, account disabled). */
  async renew(db: Db, lease: Lease, leaseMs: number): Promise<boolean> {
    const rows = await db.query(
      `UPDATE ${this.kind.table} SET lease_expires_at = now() + make_interval(secs => $3::double precision / 1000) WHERE ${this.fence()} RETURNING id`,
      [lease.id, lease.token, leaseMs],
    );
    return rows.length > 0;
  }

  /** Gives a lease back without a commit, so another worker may take the job at once. */
  async release(db: Db, lease: Lease): Promise<void> {
    await db.query(`UPDATE ${this.kind.table} SET lease_token = NULL, lease_expires_at = NULL WHERE id = $1 AND lease_token = $2`, [lease.id, lease.token]);
  }

  /** Ends a held job as `failed` with its error; false (nothing written) when the lease is no longer held. */
  async fail(db: Db, lease: Lease, error: unknown): Promise<boolean> {
    const rows = await db.query(
      `UPDATE ${this.kind.table} SET status = 'failed', error = $3, finished_at = now(), lease_token = NULL, lease_expires_at = NULL
        WHERE ${this.fence()} RETURNING id`,
      [lease.id, lease.token, JSON.stringify(error)],
    );
    return rows.length > 0;
  }

  /** Ends every job past its deadline as `expired` (what it committed stays); returns how many. */
  async expire(db: Db): Promise<number> {
    const rows = await db.query(
      `UPDATE ${this.kind.table} SET status = 'expired', finished_at = now(), lease_token = NULL, lease_expires_at = NULL
        WHERE status NOT IN ${this.terminalSql} AND expires_at <= now() RETURNING id`,
    );
    return rows.length;
  }

  /** Up to `limit` jobs terminal for `dataMs` whose data is not purged yet, oldest first: their ids and input objects. */
  async duePurge(db: Db, dataMs: number, limit: number): Promise<{ id: string; objectKey: string }[]> {
    const rows = await db.query(
      `SELECT id, object_key FROM ${this.kind.table}
        WHERE status IN ${this.terminalSql} AND purged_at IS NULL AND finished_at <= now() - make_interval(secs => $1::double precision / 1000)
        ORDER BY finished_at LIMIT $2`,
      [dataMs, limit],
    );
    return rows.map((row) => ({ id: z.string().parse(row.id), objectKey: z.string().parse(row.object_key) }));
  }
}
