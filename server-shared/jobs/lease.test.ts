/**
 * The generic lease of leased jobs (lease.ts), over a second, minimal job kind made for this test
 * (`lease_test_jobs`: the lease columns and nothing else), on the shared stack's Postgres through
 * both production drivers: the edge's HTTP `neon()` and the sidecar's WebSocket Pool. Bulk batches
 * and trainings are the service's two kinds (test/bulk-*.test.ts, test/trainings.test.ts).
 */
import { neon, Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { setStatus } from "../../ops/accounts.ts";
import { newAccount, query, stack, withDb } from "../../test/support/api.ts";
import { httpDb, poolDb, type Db } from "../db.ts";
import { neonRoute, useNeonRoute } from "../neon-route.ts";
import { LeasedJobs, type Lease } from "./lease.ts";

const JOBS = new LeasedJobs({ table: "lease_test_jobs", terminal: ["done", "failed", "cancelled", "expired"], open: ["waiting", "working"] });
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
  await query(`CREATE TABLE lease_test_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id uuid NOT NULL REFERENCES accounts (id),
    status text NOT NULL DEFAULT 'waiting',
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL DEFAULT now() + interval '1 day',
    finished_at timestamptz,
    lease_token uuid,
    lease_expires_at timestamptz,
    last_claimed_at timestamptz,
    purged_at timestamptz,
    object_key text NOT NULL DEFAULT 'input/' || gen_random_uuid())`);
});

afterAll(async () => {
  await query("DROP TABLE IF EXISTS lease_test_jobs");
  await pool?.end();
});

/** Inserts jobs of `account` (oldest first) and returns their ids. */
async function jobs(count: number, account = accountId): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await query<{ id: string }>("INSERT INTO lease_test_jobs (account_id) VALUES ($1) RETURNING id", [account]))[0]!.id);
  return ids;
}

/** A fenced write of this kind's own: it happens only while the lease is held. */
async function fencedWrite(db: Db, lease: Lease): Promise<boolean> {
  const rows = await db.query(`UPDATE lease_test_jobs SET status = 'working' WHERE ${JOBS.fence()} RETURNING id`, [lease.id, lease.token]);
  return rows.length > 0;
}

const only = (ids: string[]): [string, unknown[]] => ["j.id = ANY ($3::uuid[])", [ids]];

describe.each(drivers)("a leased job kind through %s", (_name, dbOf) => {
  it("leases the job that waited longest, each job to one worker at a time, also under concurrent claims", async () => {
    const db = dbOf();
    const ids = await jobs(3);
    const first = await JOBS.claim(db, LEASE_MS, ...only(ids));
    expect(first?.lease.id).toBe(ids[0]);
    const rest = await Promise.all([1, 2, 3].map(() => JOBS.claim(db, LEASE_MS, ...only(ids))));
    const claimed = rest.flatMap((c) => (c ? [c.lease.id] : []));
    expect(claimed.sort()).toEqual([ids[1]!, ids[2]!].sort());
    expect(rest.filter((c) => c === null)).toHaveLength(1);
  });

  it("fences every write: the holder's token writes, another token or a released lease writes nothing", async () => {
    const db = dbOf();
    const ids = await jobs(1);
    const { lease } = (await JOBS.claim(db, LEASE_MS, ...only(ids)))!;
    expect(await fencedWrite(db, { id: lease.id, token: crypto.randomUUID() })).toBe(false);
    expect(await fencedWrite(db, lease)).toBe(true);
    expect(await JOBS.renew(db, lease, LEASE_MS)).toBe(true);
    await JOBS.release(db, lease);
    expect(await fencedWrite(db, lease)).toBe(false);
    expect(await JOBS.renew(db, lease, LEASE_MS)).toBe(false);
    // Released: another worker takes it at once, and turns go to the job that waited longest.
    expect((await JOBS.claim(db, LEASE_MS, ...only(ids)))?.lease.id).toBe(lease.id);
  });

  it("gives a job whose lease expired (a crashed worker) to the next claim, and the old holder commits nothing", async () => {
    const db = dbOf();
    const ids = await jobs(1);
    const crashed = (await JOBS.claim(db, 50, ...only(ids)))!.lease;
    expect(await JOBS.claim(db, LEASE_MS, ...only(ids))).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = (await JOBS.claim(db, LEASE_MS, ...only(ids)))!.lease;
    expect(next.id).toBe(crashed.id);
    expect(await fencedWrite(db, crashed)).toBe(false);
    expect(await JOBS.renew(db, crashed, LEASE_MS)).toBe(false);
    expect(await fencedWrite(db, next)).toBe(true);
  });

  it("takes no job of a disabled account and fences its holder out; fail and expire end jobs for good", async () => {
    const db = dbOf();
    const other = (await newAccount()).accountId;
    const [held, waiting] = await jobs(2, other);
    const { lease } = (await JOBS.claim(db, LEASE_MS, ...only([held!])))!;
    await withDb((c) => setStatus(c, other, "disabled"));
    expect(await JOBS.claim(db, LEASE_MS, ...only([waiting!]))).toBeNull();
    expect(await fencedWrite(db, lease)).toBe(false);
    expect(await JOBS.fail(db, lease, { code: "x", message: "y" })).toBe(false);
    await withDb((c) => setStatus(c, other, "active"));

    expect(await JOBS.fail(db, lease, { code: "bad_file", message: "line 3" })).toBe(true);
    const [failed] = await query<{ status: string; error: unknown; finished_at: Date | null; lease_token: string | null }>(
      "SELECT status, error, finished_at, lease_token FROM lease_test_jobs WHERE id = $1",
      [held],
    );
    expect(failed).toMatchObject({ status: "failed", error: { code: "bad_file", message: "line 3" }, lease_token: null });
    expect(failed!.finished_at).not.toBeNull();
    // Terminal: never claimed again, never written under an old lease.
    expect(await JOBS.claim(db, LEASE_MS, ...only([held!]))).toBeNull();
    expect(await fencedWrite(db, lease)).toBe(false);

    await query("UPDATE lease_test_jobs SET expires_at = now() - interval '1 second' WHERE id = $1", [waiting]);
    expect(await JOBS.expire(db)).toBeGreaterThanOrEqual(1);
    expect((await query<{ status: string }>("SELECT status FROM lease_test_jobs WHERE id = $1", [waiting]))[0]!.status).toBe("expired");
    expect(await JOBS.claim(db, LEASE_MS, ...only([waiting!]))).toBeNull();
  });

  it("lists for purging the jobs terminal for the data period, oldest first, never an open or a purged one", async () => {
    const db = dbOf();
    const other = (await newAccount()).accountId;
    const [old, older, open, purged, recent] = await jobs(5, other);
    const mine = async () => (await JOBS.duePurge(db, 60_000, 1000)).map((job) => job.id).filter((id) => [old, older, open, purged, recent].includes(id));
    await query("UPDATE lease_test_jobs SET status = 'done', finished_at = now() - interval '2 minutes' WHERE id = $1", [old]);
    await query("UPDATE lease_test_jobs SET status = 'failed', finished_at = now() - interval '3 minutes' WHERE id = $1", [older]);
    // Open with a finished_at written by mistake, purged already, or terminal too recently: none of them.
    await query("UPDATE lease_test_jobs SET finished_at = now() - interval '5 minutes' WHERE id = $1", [open]);
    await query("UPDATE lease_test_jobs SET status = 'cancelled', finished_at = now() - interval '5 minutes', purged_at = now() WHERE id = $1", [purged]);
    await query("UPDATE lease_test_jobs SET status = 'done', finished_at = now() WHERE id = $1", [recent]);
    expect(await mine()).toEqual([older, old]);
    const [due] = (await JOBS.duePurge(db, 60_000, 1000)).filter((job) => job.id === older);
    expect(due!.objectKey).toMatch(/^input\//);
  });
});

describe("a job kind's names", () => {
  it("are constants of the code: a table or status that is not a plain SQL name is refused", () => {
    expect(() => new LeasedJobs({ table: "jobs; DROP TABLE accounts", terminal: [], open: [] })).toThrow(/bad job kind/);
    expect(() => new LeasedJobs({ table: "jobs", terminal: ["it's"], open: [] })).toThrow(/bad job kind/);
  });
});
