/**
 * The job store (store.ts) over a third, minimal kind made for this test (`store_test_jobs`: the
 * store's columns, one column of its own set at create and one frozen at submit, a data table and an
 * `onEnd` of its own): what a new kind of job is, one kind definition, on the shared stack's Postgres
 * through both production drivers, the edge's HTTP `neon()` and the sidecar's WebSocket Pool.
 * Batches and trainings are the service's two kinds (test/bulk-*.test.ts, test/trainings.test.ts).
 */
import { neon, Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import ws from "ws";
import { setStatus } from "../../ops/accounts.ts";
import { newAccount, query, stack, withDb } from "../../test/support/api.ts";
import { httpDb, poolDb, sql, type Db } from "../db.ts";
import { neonRoute, useNeonRoute } from "../neon-route.ts";
import { JobStore, type JobKind, type Lease } from "./store.ts";

const TestJob = z.object({ id: z.string(), status: z.string(), label: z.string(), frozen: z.string().nullable(), input_bytes: z.coerce.number().nullable(), item_count: z.coerce.number() });
type TestJob = z.infer<typeof TestJob>;

/** At most this many unfinished jobs per account. */
const MAX_ACTIVE = 3;

const KIND: JobKind<TestJob> = {
  table: "store_test_jobs",
  statuses: { terminal: "store_test_status_terminal", open: "store_test_status_open" },
  columns: "id, status, label, frozen, input_bytes, (SELECT count(*) FROM store_test_items i WHERE i.job_id = store_test_jobs.id) AS item_count",
  parse: (row) => TestJob.parse(row),
  objectKey: (id) => `input/${id}`,
  lifetimeMs: 86_400_000,
  quota: ({ active }) => ({ allows: sql`${active} < ${MAX_ACTIVE}`, state: sql`${MAX_ACTIVE}::int AS max_active` }),
  onEnd: "INSERT INTO store_test_ended (job_id, status) SELECT id, status FROM ended",
  data: [{ table: "store_test_items", job: "job_id" }],
  purgeAtOnce: ["cancelled"],
  inputAtOnce: ["failed"],
};
const LEASE_MS = 60_000;

let accountId: string;
let pool: Pool;
const drivers: [string, () => Db][] = [
  ["the edge's HTTP driver", () => httpDb(neon(stack().databaseUrl))],
  ["the sidecar's pool", () => poolDb(pool)],
];

beforeAll(async () => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: stack().databaseUrl, max: 4 });
  accountId = (await newAccount()).accountId;
  await query(`CREATE TABLE store_test_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    status text NOT NULL DEFAULT 'uploading',
    idempotency_key text NOT NULL DEFAULT gen_random_uuid()::text,
    object_key text NOT NULL DEFAULT 'input/' || gen_random_uuid(),
    input_bytes bigint,
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    submitted_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    expires_at timestamptz NOT NULL DEFAULT now() + interval '1 day',
    purged_at timestamptz,
    input_deleted_at timestamptz,
    lease_token uuid,
    lease_expires_at timestamptz,
    last_claimed_at timestamptz,
    label text NOT NULL DEFAULT '',
    frozen text,
    UNIQUE (account_id, idempotency_key))`);
  await query(`CREATE OR REPLACE FUNCTION store_test_status_terminal(status text) RETURNS boolean LANGUAGE sql IMMUTABLE
    RETURN status IN ('done', 'failed', 'cancelled', 'expired')`);
  await query(`CREATE OR REPLACE FUNCTION store_test_status_open(status text) RETURNS boolean LANGUAGE sql IMMUTABLE
    RETURN status IN ('queued', 'validating', 'working')`);
  await query("CREATE TABLE store_test_items (job_id uuid NOT NULL REFERENCES store_test_jobs (id), n integer NOT NULL)");
  await query("CREATE TABLE store_test_ended (job_id uuid NOT NULL, status text NOT NULL)");
});

afterAll(async () => {
  await query("DROP TABLE IF EXISTS store_test_items, store_test_ended, store_test_jobs");
  await query("DROP FUNCTION IF EXISTS store_test_status_terminal, store_test_status_open");
  await pool?.end();
});

/** Inserts queued jobs of `account` (submitted oldest first) and returns their ids. */
async function jobs(count: number, account = accountId): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await query<{ id: string }>("INSERT INTO store_test_jobs (account_id, status, submitted_at) VALUES ($1, 'queued', clock_timestamp()) RETURNING id", [account]))[0]!.id);
  return ids;
}

/** A fenced write of this kind's own: it happens only while the lease is held. */
async function fencedWrite(db: Db, lease: Lease): Promise<boolean> {
  const store = new JobStore(KIND, db);
  const rows = await db.query(sql`UPDATE store_test_jobs SET status = 'working' WHERE ${store.fence(lease)} RETURNING id`);
  return rows.length > 0;
}

const only = (ids: string[]) => sql`j.id = ANY (${ids}::uuid[])`;

describe.each(drivers)("the lease of a job kind through %s", (_name, dbOf) => {
  it("leases the job that waited longest since its submission, each job to one worker at a time, also under concurrent claims", async () => {
    const db = dbOf();
    const jobsOf = new JobStore(KIND, db);
    const ids = await jobs(3);
    // Created first, submitted last: its wait starts at its submission.
    await query("UPDATE store_test_jobs SET submitted_at = clock_timestamp() WHERE id = $1", [ids[0]]);
    const first = await jobsOf.claim(LEASE_MS, only(ids));
    expect(first?.lease.id).toBe(ids[1]);
    const rest = await Promise.all([1, 2, 3].map(() => jobsOf.claim(LEASE_MS, only(ids))));
    const claimed = rest.flatMap((c) => (c ? [c.lease.id] : []));
    expect(claimed.sort()).toEqual([ids[0]!, ids[2]!].sort());
    expect(rest.filter((c) => c === null)).toHaveLength(1);
  });

  it("fences every write: the holder's token writes, another token or a released lease writes nothing", async () => {
    const db = dbOf();
    const jobsOf = new JobStore(KIND, db);
    const ids = await jobs(1);
    const { lease } = (await jobsOf.claim(LEASE_MS, only(ids)))!;
    expect(await fencedWrite(db, { id: lease.id, token: crypto.randomUUID() })).toBe(false);
    expect(await fencedWrite(db, lease)).toBe(true);
    expect(await jobsOf.renew(lease, LEASE_MS)).toBe(true);
    await jobsOf.release(lease);
    expect(await fencedWrite(db, lease)).toBe(false);
    expect(await jobsOf.renew(lease, LEASE_MS)).toBe(false);
    // Released: another worker takes it at once, and turns go to the job that waited longest.
    expect((await jobsOf.claim(LEASE_MS, only(ids)))?.lease.id).toBe(lease.id);
  });

  it("gives a job whose lease expired (a crashed worker) to the next claim, and the old holder commits nothing", async () => {
    const db = dbOf();
    const jobsOf = new JobStore(KIND, db);
    const ids = await jobs(1);
    const crashed = (await jobsOf.claim(50, only(ids)))!.lease;
    expect(await jobsOf.claim(LEASE_MS, only(ids))).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = (await jobsOf.claim(LEASE_MS, only(ids)))!.lease;
    expect(next.id).toBe(crashed.id);
    expect(await fencedWrite(db, crashed)).toBe(false);
    expect(await jobsOf.renew(crashed, LEASE_MS)).toBe(false);
    expect(await fencedWrite(db, next)).toBe(true);
  });

  it("takes no job of a disabled account and fences its holder out; fail and expire end jobs for good", async () => {
    const db = dbOf();
    const jobsOf = new JobStore(KIND, db);
    const other = (await newAccount()).accountId;
    const [held, waiting] = await jobs(2, other);
    const { lease } = (await jobsOf.claim(LEASE_MS, only([held!])))!;
    await withDb((c) => setStatus(c, other, "disabled"));
    expect(await jobsOf.claim(LEASE_MS, only([waiting!]))).toBeNull();
    expect(await fencedWrite(db, lease)).toBe(false);
    expect(await jobsOf.fail(lease, { code: "x", message: "y" })).toBe(false);
    await withDb((c) => setStatus(c, other, "active"));

    expect(await jobsOf.fail(lease, { code: "bad_file", message: "line 3" })).toBe(true);
    const [failed] = await query<{ status: string; error: unknown; finished_at: Date | null; lease_token: string | null }>(
      "SELECT status, error, finished_at, lease_token FROM store_test_jobs WHERE id = $1",
      [held],
    );
    expect(failed).toMatchObject({ status: "failed", error: { code: "bad_file", message: "line 3" }, lease_token: null });
    expect(failed!.finished_at).not.toBeNull();
    // Terminal: never claimed again, never written under an old lease.
    expect(await jobsOf.claim(LEASE_MS, only([held!]))).toBeNull();
    expect(await fencedWrite(db, lease)).toBe(false);

    await query("UPDATE store_test_jobs SET expires_at = now() - interval '1 second' WHERE id = $1", [waiting]);
    expect(await jobsOf.expire()).toBeGreaterThanOrEqual(1);
    expect((await query<{ status: string }>("SELECT status FROM store_test_jobs WHERE id = $1", [waiting]))[0]!.status).toBe("expired");
    // The kind's onEnd ran in the same statement, for the expired job and not for the failed one.
    expect(await query("SELECT status FROM store_test_ended WHERE job_id = ANY ($1::uuid[])", [[held, waiting]])).toEqual([{ status: "expired" }]);
    expect(await jobsOf.claim(LEASE_MS, only([waiting!]))).toBeNull();
  });

  it("lists for purging the jobs terminal for the data period, oldest first, never an open or a purged one", async () => {
    const db = dbOf();
    const jobsOf = new JobStore(KIND, db);
    const other = (await newAccount()).accountId;
    const [old, older, open, purged, recent] = await jobs(5, other);
    const mine = async () => (await jobsOf.duePurge(60_000, 1000)).map((job) => job.id).filter((id) => [old, older, open, purged, recent].includes(id));
    await query("UPDATE store_test_jobs SET status = 'done', finished_at = now() - interval '2 minutes' WHERE id = $1", [old]);
    await query("UPDATE store_test_jobs SET status = 'failed', finished_at = now() - interval '3 minutes' WHERE id = $1", [older]);
    // Open with a finished_at written by mistake, purged already, or terminal too recently: none of them.
    await query("UPDATE store_test_jobs SET finished_at = now() - interval '5 minutes' WHERE id = $1", [open]);
    await query("UPDATE store_test_jobs SET status = 'cancelled', finished_at = now() - interval '5 minutes', purged_at = now() WHERE id = $1", [purged]);
    await query("UPDATE store_test_jobs SET status = 'done', finished_at = now() WHERE id = $1", [recent]);
    expect(await mine()).toEqual([older, old]);
    const [due] = (await jobsOf.duePurge(60_000, 1000)).filter((job) => job.id === older);
    expect(due!.objectKey).toMatch(/^input\//);
  });
});

describe("prompt input deletion", () => {
  it("lists the jobs ended in the kind's inputAtOnce statuses until their input is recorded deleted, never an open, a purged or another status's job", async () => {
    const jobsOf = new JobStore(KIND, poolDb(pool));
    const other = (await newAccount()).accountId;
    const [failed, done, open, purged] = await jobs(4, other);
    const mine = async () => (await jobsOf.dueInputDeletion(1000)).map((job) => job.id).filter((id) => [failed, done, open, purged].includes(id));
    await query("UPDATE store_test_jobs SET status = 'failed', finished_at = now() WHERE id = ANY ($1::uuid[])", [[failed, purged]]);
    await query("UPDATE store_test_jobs SET purged_at = now() WHERE id = $1", [purged]);
    await query("UPDATE store_test_jobs SET status = 'done', finished_at = now() WHERE id = $1", [done]);
    expect(await mine()).toEqual([failed]);
    const [due] = (await jobsOf.dueInputDeletion(1000)).filter((job) => job.id === failed);
    expect(due!.objectKey).toMatch(/^input\//);
    await jobsOf.inputDeleted(failed!);
    expect(await mine()).toEqual([]);
    // Its data is the data period's: not purged by this.
    expect(await query("SELECT purged_at FROM store_test_jobs WHERE id = $1", [failed])).toEqual([{ purged_at: null }]);
    // A kind without inputAtOnce has none due.
    expect(await new JobStore({ ...KIND, inputAtOnce: undefined }, poolDb(pool)).dueInputDeletion(1000)).toEqual([]);
  });
});

describe.each(drivers)("a job's lifecycle through %s", (_name, dbOf) => {
  it("creates once per idempotency key with the kind's own columns, refuses past the kind's quota, and finds and lists only the account's jobs", async () => {
    const jobsOf = new JobStore(KIND, dbOf());
    const account = (await newAccount()).accountId;
    const first = await jobsOf.create({ id: crypto.randomUUID(), accountId: account, idempotencyKey: "one", columns: { label: "first" } });
    expect(first).toMatchObject({ created: true, job: { status: "uploading", label: "first", frozen: null, item_count: 0 } });
    const again = await jobsOf.create({ id: crypto.randomUUID(), accountId: account, idempotencyKey: "one", columns: { label: "ignored" } });
    expect(again).toEqual({ created: false, job: (first as { job: TestJob }).job });
    // Concurrent creates under the account's lock: exactly the quota's remaining slots are taken.
    const outcomes = await Promise.all(["a", "b", "c", "d"].map((key) => jobsOf.create({ id: crypto.randomUUID(), accountId: account, idempotencyKey: key })));
    expect(outcomes.filter((o) => "created" in o && o.created)).toHaveLength(MAX_ACTIVE - 1);
    const refused = outcomes.filter((o) => "quota" in o);
    expect(refused).toHaveLength(2);
    expect(refused[0]).toEqual({ job: null, quota: { max_active: MAX_ACTIVE, active: String(MAX_ACTIVE), kept: String(MAX_ACTIVE) } });

    const id = (first as { job: TestJob }).job.id;
    expect(await jobsOf.find(id, account)).toMatchObject({ id, label: "first" });
    expect(await jobsOf.find(id, accountId)).toBeNull();
    const page = await jobsOf.list(account, { after: undefined, limit: 2 });
    expect(page.hasMore).toBe(true);
    const rest = await jobsOf.list(account, { after: page.rows.at(-1)!.id, limit: 2 });
    expect([...page.rows, ...rest.rows].map((job) => job.id).sort()).toHaveLength(MAX_ACTIVE);
    expect(rest.hasMore).toBe(false);
    expect((await jobsOf.list(accountId, { after: undefined, limit: 100 })).rows.map((job) => job.id)).not.toContain(id);
  });

  it("submits once with what the kind freezes, claims a queued job into validating, cancels with the kind's onEnd, purges the kind's data", async () => {
    const jobsOf = new JobStore(KIND, dbOf());
    const account = (await newAccount()).accountId;
    const created = await jobsOf.create({ id: crypto.randomUUID(), accountId: account, idempotencyKey: "k" });
    const id = (created as { job: TestJob }).job.id;
    // A frozen value has parameters of its own and reads the job's row as the kind's table.
    const frozen = { frozen: sql`${"kept"}::text || '@' || store_test_jobs.account_id::text` };
    expect(await jobsOf.submit(id, accountId, 10, frozen)).toBeNull(); // another account's job
    expect(await jobsOf.submit(id, account, 10, frozen)).toMatchObject({ status: "queued", input_bytes: 10, frozen: `kept@${account}` });
    expect(await jobsOf.submit(id, account, 99, frozen)).toBeNull(); // no longer uploading: unchanged

    const claimed = (await jobsOf.claim(LEASE_MS, sql`j.id = ${id}`))!;
    expect(claimed.row).toMatchObject({ id, status: "validating" });
    expect(claimed.row.started_at).not.toBeNull();
    await query("INSERT INTO store_test_items (job_id, n) VALUES ($1, 1), ($1, 2)", [id]);
    expect((await jobsOf.find(id, account))!.item_count).toBe(2);

    expect(await jobsOf.cancel(id, accountId)).toBeNull();
    expect(await jobsOf.cancel(id, account)).toMatchObject({ id, status: "cancelled" });
    expect(await jobsOf.cancel(id, account)).toBeNull(); // terminal already: nothing changes, onEnd not run again
    expect(await query("SELECT status FROM store_test_ended WHERE job_id = $1", [id])).toEqual([{ status: "cancelled" }]);
    // A cancel ends the lease: its holder's writes are fenced out, and nothing claims it again.
    expect(await jobsOf.renew(claimed.lease, LEASE_MS)).toBe(false);
    expect(await jobsOf.claim(LEASE_MS, sql`j.id = ${id}`)).toBeNull();

    // Cancelled is purged at once for this kind (nothing of it is served): due long before its data period.
    expect((await jobsOf.duePurge(86_400_000, 1000)).map((job) => job.id)).toContain(id);
    await query("UPDATE store_test_jobs SET finished_at = now() - interval '2 minutes' WHERE id = $1", [id]);
    expect((await jobsOf.duePurge(60_000, 1000)).map((job) => job.id)).toContain(id);
    await jobsOf.purge(id);
    expect(await jobsOf.find(id, account)).toMatchObject({ item_count: 0 });
    expect((await jobsOf.duePurge(60_000, 1000)).map((job) => job.id)).not.toContain(id);
    await jobsOf.deleteMetadata(60_000);
    expect(await jobsOf.find(id, account)).toBeNull();
  });
});

describe("a job kind's names", () => {
  it("are constants of the code: a table, status, data table or column that is not a plain SQL name is refused", async () => {
    expect(() => new JobStore({ ...KIND, table: "jobs; DROP TABLE accounts" }, poolDb(pool))).toThrow(/bad job kind/);
    expect(() => new JobStore({ ...KIND, statuses: { ...KIND.statuses, open: "status_open(status) OR true; --" } }, poolDb(pool))).toThrow(/bad job kind/);
    expect(() => new JobStore({ ...KIND, data: [{ table: "items", job: "id = id OR true" }] }, poolDb(pool))).toThrow(/bad job kind/);
    const jobsOf = new JobStore(KIND, poolDb(pool));
    await expect(jobsOf.create({ id: crypto.randomUUID(), accountId, idempotencyKey: "x", columns: { "label) VALUES (1); --": "x" } })).rejects.toThrow(/bad column/);
    await expect(jobsOf.submit(crypto.randomUUID(), accountId, 1, { "status = 'done', label": sql`${"x"}` })).rejects.toThrow(/bad column/);
  });
});
