/**
 * The job worker loop (worker.ts) over two minimal kinds made for this test, each a JobStore kind
 * on a table of its own whose step counts one unit of work under the fence (two units end a job):
 * what a new kind of job is in the sidecar, one `JobSteps`. On the shared stack's Postgres through
 * the sidecar's Pool. The service's kinds run in test/bulk-*.test.ts and test/training*.test.ts.
 */
import { Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { z } from "zod";
import { newAccount, query, stack } from "../../test/support/api.ts";
import { poolDb, raw, sql } from "../../server-shared/db.ts";
import { neonRoute, useNeonRoute } from "../../server-shared/neon-route.ts";
import { JobStore, type JobKind, type Lease } from "../../server-shared/jobs/store.ts";
import { JobWorker, type JobSteps, type JobTiming } from "./worker.ts";

const TIMING: JobTiming = { leaseMs: 2000, renewMs: 100, idleMs: 20 };

let pool: Pool;
let accountId: string;

const kindOf = (table: string): JobKind<{ id: string; status: string; units: number }> => ({
  table,
  statuses: { terminal: "worker_test_status_terminal", open: "worker_test_status_open" },
  columns: "id, status, units",
  parse: (row) => z.object({ id: z.string(), status: z.string(), units: z.coerce.number() }).parse(row),
  objectKey: (id) => `input/${id}`,
  lifetimeMs: 60_000,
  quota: () => ({ allows: sql`true`, state: sql`1 AS unlimited` }),
  data: [],
});

/** A minimal kind's steps: each step counts one unit under the fence; the second ends the job. `hook` runs inside each step first. */
class CountingSteps implements JobSteps<Lease> {
  readonly store: JobStore<unknown>;
  readonly order: string[];
  /** The jobs whose steps committed, in order. */
  readonly stepped: string[] = [];
  hook: (claim: Lease, signal: AbortSignal) => Promise<void> = async () => undefined;

  constructor(
    readonly name: string,
    order: string[],
  ) {
    this.store = new JobStore(kindOf(name), poolDb(pool));
    this.order = order;
  }

  async claim(leaseMs: number): Promise<Lease | null> {
    return (await this.store.claim(leaseMs, sql`j.account_id = ${accountId}`))?.lease ?? null;
  }

  renew(claim: Lease, leaseMs: number): Promise<boolean> {
    return this.store.renew(claim, leaseMs);
  }

  release(claim: Lease): Promise<void> {
    return this.store.release(claim);
  }

  async step(claim: Lease, signal: AbortSignal): Promise<void> {
    await this.hook(claim, signal);
    signal.throwIfAborted();
    const rows = await poolDb(pool).query(
      sql`UPDATE ${raw(this.name)} SET units = units + 1, status = CASE WHEN units + 1 >= 2 THEN 'done' ELSE status END,
                 finished_at = CASE WHEN units + 1 >= 2 THEN now() ELSE NULL END
           WHERE ${this.store.fence(claim)} RETURNING id`,
    );
    if (rows.length === 0) return;
    this.order.push(this.name);
    this.stepped.push(claim.id);
  }
}

async function createTable(name: string): Promise<void> {
  await query(`CREATE TABLE ${name} (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), account_id uuid NOT NULL REFERENCES accounts (id), status text NOT NULL DEFAULT 'queued',
    idempotency_key text NOT NULL DEFAULT gen_random_uuid()::text, object_key text NOT NULL DEFAULT '', input_bytes bigint, error jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(), submitted_at timestamptz DEFAULT clock_timestamp(), started_at timestamptz,
    finished_at timestamptz, expires_at timestamptz NOT NULL DEFAULT now() + interval '1 hour', purged_at timestamptz,
    lease_token uuid, lease_expires_at timestamptz, last_claimed_at timestamptz, units integer NOT NULL DEFAULT 0)`);
}

async function insert(table: string, count: number): Promise<string[]> {
  const rows = await query<{ id: string }>(`INSERT INTO ${table} (account_id) SELECT $1 FROM generate_series(1, $2) RETURNING id`, [accountId, count]);
  return rows.map((row) => row.id);
}

async function until(done: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const statusOf = async (table: string, id: string) => (await query<{ status: string; units: number; lease_token: string | null }>(`SELECT status, units, lease_token FROM ${table} WHERE id = $1`, [id]))[0]!;

beforeAll(async () => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: stack().databaseUrl, max: 4 });
  await query(`CREATE OR REPLACE FUNCTION worker_test_status_terminal(status text) RETURNS boolean LANGUAGE sql IMMUTABLE
    RETURN status IN ('done', 'failed', 'cancelled', 'expired')`);
  await query(`CREATE OR REPLACE FUNCTION worker_test_status_open(status text) RETURNS boolean LANGUAGE sql IMMUTABLE
    RETURN status IN ('queued', 'validating')`);
  await createTable("worker_test_a");
  await createTable("worker_test_b");
});

afterAll(async () => {
  await query("DROP TABLE IF EXISTS worker_test_a, worker_test_b");
  await query("DROP FUNCTION IF EXISTS worker_test_status_terminal, worker_test_status_open");
  await pool?.end();
});

describe("the job worker", () => {
  it("runs its kind's jobs a step per claim until each is done, the jobs in turns, beside another kind's worker", async () => {
    accountId = (await newAccount()).accountId;
    const order: string[] = [];
    const a = new CountingSteps("worker_test_a", order);
    const b = new CountingSteps("worker_test_b", order);
    const jobsOfA = await insert("worker_test_a", 2);
    await insert("worker_test_b", 2);
    const workers = [new JobWorker(a, { timing: TIMING }), new JobWorker(b, { timing: TIMING })];
    for (const worker of workers) worker.start();
    try {
      await until(async () => order.length === 8);
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
    // Each job took two turns, its lease released after each: the one that waited longest goes next.
    expect(a.stepped).toEqual([...jobsOfA, ...jobsOfA]);
    expect(order.filter((kind) => kind === "worker_test_b")).toHaveLength(4);
    expect(await query("SELECT status, units FROM worker_test_a WHERE account_id = $1", [accountId])).toEqual([
      { status: "done", units: 2 },
      { status: "done", units: 2 },
    ]);
  });

  it("aborts a step whose lease was lost (nothing of it commits), and releases a job whose step failed, naming the kind in the log", async () => {
    accountId = (await newAccount()).accountId;
    const a = new CountingSteps("worker_test_a", []);
    const [lost, failing] = await insert("worker_test_a", 2);
    const aborted: string[] = [];
    const pending = new Set([lost, failing]);
    a.hook = async (claim, signal) => {
      if (!pending.delete(claim.id)) return;
      if (claim.id === failing) throw new Error("a bug in the step");
      // Another worker takes the lease over (as after an expiry): the next renewal finds it gone.
      await query("UPDATE worker_test_a SET lease_token = gen_random_uuid() WHERE id = $1", [lost]);
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      aborted.push(claim.id);
    };
    const log: string[] = [];
    const worker = new JobWorker(a, { timing: TIMING, log: (line) => log.push(line) });
    worker.start();
    try {
      await until(async () => aborted.length === 1 && log.length === 1);
      // The lost step wrote nothing; the failed step's job was released at once, and its later turns finish it.
      expect(await statusOf("worker_test_a", lost!)).toMatchObject({ units: 0 });
      await until(async () => (await statusOf("worker_test_a", failing!)).status === "done");
    } finally {
      await worker.stop();
    }
    expect(log).toEqual(["sidecar: worker_test_a worker: Error: a bug in the step"]);
  });

  it("an idle worker looks for work at once when woken, not at its next poll", async () => {
    accountId = (await newAccount()).accountId;
    const order: string[] = [];
    const a = new CountingSteps("worker_test_a", order);
    let claimed = 0;
    const claim = a.claim.bind(a);
    a.claim = async (leaseMs) => {
      const found = await claim(leaseMs);
      claimed += 1;
      return found;
    };
    // Its poll is an hour away: only the wake can find the job.
    const worker = new JobWorker(a, { timing: { ...TIMING, idleMs: 3_600_000 } });
    worker.start();
    try {
      // Its first claim found nothing: it is waiting for its next poll.
      await until(async () => claimed === 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      await insert("worker_test_a", 1);
      worker.wake();
      await until(async () => order.length === 2);
    } finally {
      await worker.stop();
    }
  });

  it("a wake that comes while a claim finds nothing makes the worker look again instead of waiting", async () => {
    accountId = (await newAccount()).accountId;
    const order: string[] = [];
    const a = new CountingSteps("worker_test_a", order);
    const claim = a.claim.bind(a);
    let first: Awaited<ReturnType<typeof claim>> | undefined;
    const worker = new JobWorker(a, { timing: { ...TIMING, idleMs: 3_600_000 } });
    // The job is committed, and the wake sent, after the first claim has read and found nothing.
    a.claim = async (leaseMs) => {
      const found = await claim(leaseMs);
      if (first === undefined) {
        first = found;
        await insert("worker_test_a", 1);
        worker.wake();
      }
      return found;
    };
    worker.start();
    try {
      await until(async () => order.length === 2);
    } finally {
      await worker.stop();
    }
    expect(first).toBeNull();
  });

  it("stops at once while idle, whatever its poll", async () => {
    accountId = (await newAccount()).accountId;
    const a = new CountingSteps("worker_test_a", []);
    const claim = a.claim.bind(a);
    let found!: () => void;
    const claimed = new Promise<void>((resolve) => (found = resolve));
    a.claim = async (leaseMs) => {
      const result = await claim(leaseMs);
      found();
      return result;
    };
    const worker = new JobWorker(a, { timing: { ...TIMING, idleMs: 3_600_000 } });
    worker.start();
    // Its claim found nothing: it is waiting for its next poll.
    await claimed;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    await worker.stop();
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("stops: a draining stop lets the step in flight commit, an abandoning one commits nothing and releases the job", async () => {
    for (const drain of [true, false]) {
      accountId = (await newAccount()).accountId;
      const a = new CountingSteps("worker_test_a", []);
      const [id] = await insert("worker_test_a", 1);
      let entered!: () => void;
      const inStep = new Promise<void>((resolve) => (entered = resolve));
      a.hook = async () => {
        entered();
        await new Promise((resolve) => setTimeout(resolve, 300));
      };
      const worker = new JobWorker(a, { timing: TIMING });
      worker.start();
      await inStep;
      await worker.stop(drain ? { drain: AbortSignal.timeout(5000) } : {});
      expect(await statusOf("worker_test_a", id!)).toEqual({ status: "validating", units: drain ? 1 : 0, lease_token: null });
    }
  });
});
