/**
 * Prepaid image credit (server-shared/credit.ts) on the shared stack's Postgres, through both
 * production drivers: the edge's HTTP `neon()` and the sidecar's WebSocket Pool. Concurrent
 * reserves never overdraw, and a reservation ends once whichever of settle, release and the sweep
 * comes first; the operator's grant and `show` (ops/accounts.ts) run on the same store.
 */
import { neon, Pool } from "@neondatabase/serverless";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import ws from "ws";
import { creditFor, CreditBalance, IMAGE_PRICING, textTokensOf } from "../contract/credit.ts";
import { grantCredit, showAccount } from "../ops/accounts.ts";
import { CreditStore } from "../server-shared/credit.ts";
import { httpDb, poolDb, type Db } from "../server-shared/db.ts";
import { neonRoute, useNeonRoute } from "../server-shared/neon-route.ts";
import { query, stack, withDb } from "./support/api.ts";

const TTL_MS = 60_000;

let pool: Pool;
const drivers: [string, () => Db][] = [
  ["the edge's HTTP driver", () => httpDb(neon(stack().databaseUrl))],
  ["the sidecar's pool", () => poolDb(pool)],
];

beforeAll(() => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: stack().databaseUrl, max: 4 });
});

afterAll(async () => {
  await pool?.end();
});

/** A new account with no credit: its id and subject. */
async function account(): Promise<{ id: string; subject: string }> {
  const subject = `credit-${crypto.randomUUID()}`;
  const [row] = await query<{ id: string }>(`INSERT INTO accounts (idp_issuer, idp_subject) VALUES ('https://idp.credit.test', $1) RETURNING id`, [subject]);
  return { id: row!.id, subject };
}

/**
 * The account's credit as the tables hold it, with the identity every change must keep: what was
 * granted is exactly what is still in the balance, what is held, and what was charged.
 */
async function books(accountId: string): Promise<{ balance: number; granted: number; reserved: number; charged: number }> {
  const [row] = await query<Record<string, string>>(
    `SELECT (SELECT coalesce(sum(balance_micro_usd), 0) FROM credit_balances WHERE account_id = $1) AS balance,
            (SELECT coalesce(sum(amount_micro_usd), 0) FROM credit_grants WHERE account_id = $1) AS granted,
            (SELECT coalesce(sum(amount_micro_usd), 0) FROM credit_reservations WHERE account_id = $1 AND status = 'reserved') AS reserved,
            (SELECT coalesce(sum(charged_micro_usd), 0) FROM credit_reservations WHERE account_id = $1 AND status = 'settled') AS charged`,
    [accountId],
  );
  const books = { balance: Number(row!.balance), granted: Number(row!.granted), reserved: Number(row!.reserved), charged: Number(row!.charged) };
  expect(books.balance + books.reserved + books.charged).toBe(books.granted);
  return books;
}

async function reservation(id: string): Promise<{ status: string; charged: number | null; finished: boolean }> {
  const [row] = await query<{ status: string; charged_micro_usd: string | null; finished_at: Date | null }>(
    "SELECT status, charged_micro_usd, finished_at FROM credit_reservations WHERE id = $1",
    [id],
  );
  return { status: row!.status, charged: row!.charged_micro_usd === null ? null : Number(row!.charged_micro_usd), finished: row!.finished_at !== null };
}

/** Reserves `amount`, failing the test when the balance does not cover it; the reservation's id. */
async function reserved(credit: CreditStore, accountId: string, amount: number, requestId = `req_${crypto.randomUUID()}`): Promise<string> {
  const hold = await credit.reserve(accountId, amount, { requestId, ttlMs: TTL_MS });
  if (!hold.ok) throw new Error(`reserve refused at balance ${hold.balanceMicroUsd}`);
  return hold.id;
}

describe.each(drivers)("image credit through %s", (_name, dbOf) => {
  it("lets 50 concurrent reserves of 100 take a balance of 1,000 exactly: 10 succeed, 40 are refused, nothing overdrawn", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    await credit.grant(id, 1_000, "test");
    // A reserve that overdrew would fail the balance's CHECK (>= 0) and reject Promise.all.
    const holds = await Promise.all(Array.from({ length: 50 }, (_, i) => credit.reserve(id, 100, { requestId: `req_${i}`, ttlMs: TTL_MS })));
    const taken = holds.flatMap((h) => (h.ok ? [h.id] : []));
    const refused = holds.flatMap((h) => (h.ok ? [] : [h.balanceMicroUsd]));
    expect(taken).toHaveLength(10);
    expect(new Set(taken).size).toBe(10);
    // Each refusal names the balance it could not use, read after the refusal: by then, none.
    expect(refused).toEqual(Array(40).fill(0));
    expect(await credit.balance(id)).toEqual({ balanceMicroUsd: 0, reservedMicroUsd: 1_000 });
    expect(await books(id)).toEqual({ balance: 0, granted: 1_000, reserved: 1_000, charged: 0 });

    // Settling each for 60 gives 40 of its 100 back.
    expect(await Promise.all(taken.map((hold) => credit.settle(hold, 60)))).toEqual(Array(10).fill(true));
    expect(await credit.balance(id)).toEqual({ balanceMicroUsd: 400, reservedMicroUsd: 0 });
    expect(await reservation(taken[0]!)).toEqual({ status: "settled", charged: 60, finished: true });

    // A second settle of any of them changes nothing.
    expect(await Promise.all(taken.map((hold) => credit.settle(hold, 10)))).toEqual(Array(10).fill(false));
    expect(await books(id)).toEqual({ balance: 400, granted: 1_000, reserved: 0, charged: 600 });
  });

  it("ends a reservation once: no release after a settle, no settle after a release, one of two releases", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    await credit.grant(id, 1_000, "test");

    const settled = await reserved(credit, id, 300);
    expect(await credit.settle(settled, 100)).toBe(true);
    expect(await credit.release(settled)).toBe(false);
    expect(await reservation(settled)).toEqual({ status: "settled", charged: 100, finished: true });
    expect((await credit.balance(id)).balanceMicroUsd).toBe(900);

    const released = await reserved(credit, id, 300);
    expect(await credit.release(released)).toBe(true);
    expect(await credit.settle(released, 100)).toBe(false);
    expect(await reservation(released)).toEqual({ status: "released", charged: null, finished: true });
    expect((await credit.balance(id)).balanceMicroUsd).toBe(900);

    const twice = await reserved(credit, id, 300);
    expect((await Promise.all([credit.release(twice), credit.release(twice)])).sort()).toEqual([false, true]);
    expect(await books(id)).toEqual({ balance: 900, granted: 1_000, reserved: 0, charged: 100 });

    expect(await credit.settle(crypto.randomUUID(), 1)).toBe(false);
    expect(await credit.release(crypto.randomUUID())).toBe(false);
  });

  it("lets exactly one of a concurrent settle and release end each reservation, and the balance follows the winner", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    await credit.grant(id, 2_000, "test");
    const holds = await Promise.all(Array.from({ length: 20 }, () => reserved(credit, id, 100)));
    const races = await Promise.all(holds.map((hold) => Promise.all([credit.settle(hold, 30), credit.release(hold)])));
    for (const [settledIt, releasedIt] of races) expect(settledIt !== releasedIt).toBe(true);
    const settles = races.filter(([settledIt]) => settledIt).length;
    expect(await books(id)).toEqual({ balance: 2_000 - 30 * settles, granted: 2_000, reserved: 0, charged: 30 * settles });
  });

  it("clamps a charge above the reservation to the reservation, and refuses amounts that are not whole micro-USD", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    await credit.grant(id, 1_000, "test");
    const hold = await reserved(credit, id, 200);
    expect(await credit.settle(hold, 5_000)).toBe(true);
    expect(await reservation(hold)).toMatchObject({ status: "settled", charged: 200 });
    expect(await books(id)).toEqual({ balance: 800, granted: 1_000, reserved: 0, charged: 200 });

    await expect(credit.reserve(id, 0, { requestId: "req_zero", ttlMs: TTL_MS })).rejects.toThrow(RangeError);
    await expect(credit.reserve(id, 1.5, { requestId: "req_half", ttlMs: TTL_MS })).rejects.toThrow(RangeError);
    await expect(credit.settle(hold, -1)).rejects.toThrow(RangeError);
    await expect(credit.grant(id, -5, "test")).rejects.toThrow(RangeError);
  });

  it("refuses an account that was never granted credit, with a balance of 0, and reserves nothing", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    expect(await credit.reserve(id, 1, { requestId: "req_none", ttlMs: TTL_MS })).toEqual({ ok: false, balanceMicroUsd: 0 });
    expect(await credit.balance(id)).toEqual({ balanceMicroUsd: 0, reservedMicroUsd: 0 });
    expect(await query("SELECT 1 FROM credit_reservations WHERE account_id = $1", [id])).toEqual([]);
  });

  it("sweeps only reservations past their expiry, each once, even with two sweeps at a time", async () => {
    const credit = new CreditStore(dbOf());
    // The stack's sidecar sweeps expired reservations too (its bulk worker, every 5 s): a round in which
    // it took some of ours between the UPDATE and our two sweeps is tried again (CI met this once).
    for (let round = 0; ; round++) {
      // Earlier files of the run may have left expired reservations; the counts below are this test's.
      while ((await credit.releaseExpired(100)) > 0);
      const { id } = await account();
      await credit.grant(id, 1_000, "test");
      const [dead1, dead2, dead3, live, settledDead] = await Promise.all([100, 100, 100, 100, 100].map((amount) => reserved(credit, id, amount)));
      expect(await credit.settle(settledDead!, 50)).toBe(true);
      // Three edges died an hour ago between reserve and settle; the fourth reservation is in flight.
      await query("UPDATE credit_reservations SET expires_at = now() - interval '1 hour' WHERE id = ANY ($1::uuid[])", [[dead1, dead2, dead3, settledDead]]);

      const counts = await Promise.all([credit.releaseExpired(100), credit.releaseExpired(100)]);
      // Never more than the three: a reservation released twice would count twice.
      expect(counts[0]! + counts[1]!).toBeLessThanOrEqual(3);
      if (counts[0]! + counts[1]! < 3 && round < 3) continue;
      expect(counts[0]! + counts[1]!).toBe(3);
      for (const dead of [dead1!, dead2!, dead3!]) expect(await reservation(dead)).toEqual({ status: "released", charged: null, finished: true });
      expect(await reservation(live!)).toEqual({ status: "reserved", charged: null, finished: false });
      expect(await reservation(settledDead!)).toMatchObject({ status: "settled", charged: 50 });
      expect(await books(id)).toEqual({ balance: 850, granted: 1_000, reserved: 100, charged: 50 });

      expect(await credit.releaseExpired(100)).toBe(0);
      expect(await credit.settle(dead1!, 10)).toBe(false);
      expect(await credit.settle(live!, 10)).toBe(true);
      expect(await books(id)).toEqual({ balance: 940, granted: 1_000, reserved: 0, charged: 60 });
      return;
    }
  });

  it("sweeps at most `limit` reservations, oldest expiry first", async () => {
    const credit = new CreditStore(dbOf());
    // The stack's sidecar sweeps expired reservations too (its bulk worker, every 5 s): a round in
    // which it took ours between their expiry and our sweep says nothing of `limit`, and is tried again.
    for (let round = 0; ; round++) {
      while ((await credit.releaseExpired(100)) > 0);
      const { id } = await account();
      await credit.grant(id, 1_000, "test");
      const holds = await Promise.all([1, 2, 3].map(() => reserved(credit, id, 100)));
      await query(`UPDATE credit_reservations SET expires_at = now() - make_interval(mins => 10 - array_position($1::uuid[], id)) WHERE id = ANY($1::uuid[])`, [holds]);
      const released = await credit.releaseExpired(2);
      const statuses = (await Promise.all(holds.map(reservation))).map((r) => r.status);
      if ((released !== 2 || statuses[2] !== "reserved") && round < 3) continue;
      expect(released).toBe(2);
      expect(statuses).toEqual(["released", "released", "reserved"]);
      expect(await credit.releaseExpired(2)).toBe(1);
      return;
    }
  });

  it("keeps the ledger and the balance in agreement over grants, and writes neither for an unknown account", async () => {
    const credit = new CreditStore(dbOf());
    const { id } = await account();
    expect(await credit.grant(id, 5_000_000, "first")).toBe(5_000_000);
    expect(await credit.grant(id, 250_000, "second")).toBe(5_250_000);
    const ledger = await query<{ amount_micro_usd: string; note: string }>("SELECT amount_micro_usd, note FROM credit_grants WHERE account_id = $1 ORDER BY id", [id]);
    expect(ledger).toEqual([
      { amount_micro_usd: "5000000", note: "first" },
      { amount_micro_usd: "250000", note: "second" },
    ]);
    expect(await books(id)).toEqual({ balance: 5_250_000, granted: 5_250_000, reserved: 0, charged: 0 });

    const unknown = crypto.randomUUID();
    await expect(credit.grant(unknown, 1_000, "nobody")).rejects.toMatchObject({ code: "23503" });
    expect(await query("SELECT 1 FROM credit_grants WHERE account_id = $1 UNION ALL SELECT 1 FROM credit_balances WHERE account_id = $1", [unknown])).toEqual([]);
  });
});

describe("npm run account -- credit and show (ops/accounts.ts)", () => {
  it("grants dollars to an account named by its subject, and shows the balance and the reservations not yet ended", async () => {
    const { id, subject } = await account();
    const granted = await withDb((db) => grantCredit(db, subject, { amountMicroUsd: 5_000_000, note: "operator grant" }));
    expect(granted).toEqual({ id, subject, granted_micro_usd: 5_000_000, note: "operator grant", balance_micro_usd: 5_000_000 });

    const credit = new CreditStore(poolDb(pool));
    const hold = await reserved(credit, id, 1_500, "req_shown");
    const shown = await withDb((db) => showAccount(db, id));
    expect(shown).toMatchObject({
      id,
      subject,
      status: "active",
      credit: {
        balance_micro_usd: 4_998_500,
        reserved_micro_usd: 1_500,
        oldest_reservations: [{ id: hold, amount_micro_usd: 1_500, request_id: "req_shown", created_at: expect.any(String), expires_at: expect.any(String) }],
      },
    });
    await expect(withDb((db) => grantCredit(db, "nobody-at-all", { amountMicroUsd: 1, note: "x" }))).rejects.toThrow(/no account nobody-at-all/);
  });
});

describe("the published price (contract/credit.ts)", () => {
  it("charges 2 micro-USD per billable token, $2 per million", () => {
    expect(creditFor(1_000_000)).toBe(2_000_000);
    expect(creditFor(0)).toBe(0);
    expect(() => creditFor(-1)).toThrow(RangeError);
    expect(() => creditFor(1.5)).toThrow(RangeError);
  });

  it("counts one text token per 4 UTF-8 bytes of the canonical JSON, rounded up", () => {
    expect(textTokensOf("")).toBe(0);
    expect(textTokensOf("abcd")).toBe(1);
    expect(textTokensOf("abcde")).toBe(2);
    expect(textTokensOf("é")).toBe(1); // 2 bytes
    expect(textTokensOf("€€")).toBe(2); // 6 bytes
  });

  it("shapes a balance for the wire", () => {
    const balance = { object: "credit_balance", balance_micro_usd: 400, reserved_micro_usd: 0, pricing: IMAGE_PRICING };
    expect(CreditBalance.parse(balance)).toEqual(balance);
    expect(() => CreditBalance.parse({ ...balance, balance_micro_usd: -1 })).toThrow();
  });
});
