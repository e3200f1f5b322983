/**
 * Prepaid credit for image decisions (contract/credit.ts; schema.sql credit_*): every statement on
 * an account's credit, for the edge (reserve, settle, release, balance), the sidecar's housekeeping
 * (releaseExpired) and the operator (grant).
 *
 *     const credit = new CreditStore(db);
 *     const hold = await credit.reserve(accountId, worstCase, { requestId, ttlMs });
 *     if (!hold.ok) ...                                  // 402: hold.balanceMicroUsd cannot cover it
 *     await credit.settle(hold.id, creditFor(used));     // on success: the rest goes back
 *     await credit.release(hold.id);                     // on failure: all of it goes back
 *
 * Each change is one statement, so it is atomic on either driver, and each guards itself by its
 * WHERE clause rather than by a read before it: two reserves never both take the last credit (the
 * second waits for the first's row lock, then finds the balance short), and a reservation ends
 * once, whichever of settle, release and the sweep comes first.
 */
import { z } from "zod";
import { Column, type Db } from "./db.ts";

export type Reservation = { ok: true; id: string } | { ok: false; balanceMicroUsd: number };

export interface CreditBalanceRow {
  /** What new reservations may take now. */
  balanceMicroUsd: number;
  /** Held by reservations not yet ended. */
  reservedMicroUsd: number;
}

/** A reservation not yet ended, as the operator's `show` lists it. */
export interface OutstandingReservation {
  id: string;
  amountMicroUsd: number;
  requestId: string;
  createdAt: string;
  expiresAt: string;
}

const Count = z.object({ count: Column.int });

const OutstandingRow = z.object({ id: z.string(), amount_micro_usd: Column.int, request_id: z.string(), created_at: Column.time, expires_at: Column.time });

export class CreditStore {
  constructor(private readonly db: Db) {}

  /**
   * Takes `amountMicroUsd` from the account's balance for one decision, if the balance covers it;
   * the reservation ends by itself (releaseExpired) `ttlMs` from now, which must outlast the
   * decision. Refused: the balance seen just after (0 for an account that was never granted any).
   */
  async reserve(accountId: string, amountMicroUsd: number, opts: { requestId: string; ttlMs: number }): Promise<Reservation> {
    positive(amountMicroUsd, "a reservation");
    const id = crypto.randomUUID();
    // The INSERT reads `taken`, so it adds a row only when the UPDATE took the amount.
    const rows = await this.db.query(
      `WITH taken AS (
         UPDATE credit_balances SET balance_micro_usd = balance_micro_usd - $2, updated_at = now()
          WHERE account_id = $1 AND balance_micro_usd >= $2
         RETURNING account_id)
       INSERT INTO credit_reservations (id, account_id, amount_micro_usd, request_id, expires_at)
       SELECT $3::uuid, account_id, $2, $4::text, now() + make_interval(secs => $5::double precision / 1000) FROM taken
       RETURNING id`,
      [accountId, amountMicroUsd, id, opts.requestId, opts.ttlMs],
    );
    if (rows.length > 0) return { ok: true, id };
    // Read by a statement of its own: one inside the refused statement would see the balance as it
    // was when that statement began, possibly before a concurrent reserve took what it showed.
    return { ok: false, balanceMicroUsd: (await this.balance(accountId)).balanceMicroUsd };
  }

  /**
   * Ends a reservation on success, once: charges `chargedMicroUsd` and gives the rest of the
   * reservation back. A charge above the reservation is clamped to it: the reservation was the
   * decision's worst case and the price the account agreed to before any work, so a larger figure is
   * an estimate's fault, never the account's debt. False, and nothing changed, when the reservation
   * had already ended (settled, released, or released by the sweep after it expired: a decision that
   * outlives its reservation is then not charged).
   */
  async settle(id: string, chargedMicroUsd: number): Promise<boolean> {
    if (!Number.isSafeInteger(chargedMicroUsd) || chargedMicroUsd < 0) throw new RangeError(`a charge must be a non-negative integer of micro-USD, got ${chargedMicroUsd}`);
    const rows = await this.db.query(
      `WITH settled AS (
         UPDATE credit_reservations SET status = 'settled', charged_micro_usd = least($2, amount_micro_usd), finished_at = now()
          WHERE id = $1 AND status = 'reserved'
         RETURNING account_id, amount_micro_usd - charged_micro_usd AS refund),
       refunded AS (
         UPDATE credit_balances b SET balance_micro_usd = b.balance_micro_usd + s.refund, updated_at = now()
           FROM settled s WHERE b.account_id = s.account_id)
       SELECT count(*) AS count FROM settled`,
      [id, chargedMicroUsd],
    );
    return Count.parse(rows[0]).count === 1;
  }

  /** Ends a reservation on failure, once: all of it goes back. False when it had already ended. */
  async release(id: string): Promise<boolean> {
    const rows = await this.db.query(
      `WITH released AS (
         UPDATE credit_reservations SET status = 'released', finished_at = now()
          WHERE id = $1 AND status = 'reserved'
         RETURNING account_id, amount_micro_usd),
       refunded AS (
         UPDATE credit_balances b SET balance_micro_usd = b.balance_micro_usd + r.amount_micro_usd, updated_at = now()
           FROM released r WHERE b.account_id = r.account_id)
       SELECT count(*) AS count FROM released`,
      [id],
    );
    return Count.parse(rows[0]).count === 1;
  }

  /**
   * Releases up to `limit` reservations past their expiry (an edge that died between reserve and
   * settle), oldest first; how many this call released. Each goes through `release`, one statement
   * per reservation: a sweep running beside another, or beside the decision's own settle, ends each
   * reservation once, and no statement ever holds two balances' locks (which two sweeps could take
   * in opposite orders).
   */
  async releaseExpired(limit: number): Promise<number> {
    const rows = await this.db.query(
      `SELECT id FROM credit_reservations WHERE status = 'reserved' AND expires_at <= now() ORDER BY expires_at LIMIT $1`,
      [limit],
    );
    let released = 0;
    for (const { id } of z.array(z.object({ id: z.string() })).parse(rows)) {
      if (await this.release(id)) released++;
    }
    return released;
  }

  /**
   * Grants credit: writes the ledger row (credit_grants) and adds it to the balance, creating the
   * balance row on the first grant, in one statement; the new balance. An unknown account fails the
   * ledger row's foreign key, and nothing is written.
   */
  async grant(accountId: string, amountMicroUsd: number, note: string): Promise<number> {
    positive(amountMicroUsd, "a grant");
    const rows = await this.db.query(
      `WITH granted AS (
         INSERT INTO credit_grants (account_id, amount_micro_usd, note) VALUES ($1, $2, $3)
         RETURNING account_id, amount_micro_usd)
       INSERT INTO credit_balances AS b (account_id, balance_micro_usd)
       SELECT account_id, amount_micro_usd FROM granted
       ON CONFLICT (account_id) DO UPDATE SET balance_micro_usd = b.balance_micro_usd + EXCLUDED.balance_micro_usd, updated_at = now()
       RETURNING b.balance_micro_usd`,
      [accountId, amountMicroUsd, note],
    );
    return z.object({ balance_micro_usd: Column.int }).parse(rows[0]).balance_micro_usd;
  }

  /** The account's balance and what its unfinished reservations hold; zeros for an account never granted any. */
  async balance(accountId: string): Promise<CreditBalanceRow> {
    const rows = await this.db.query(
      `SELECT coalesce((SELECT balance_micro_usd FROM credit_balances WHERE account_id = $1), 0) AS balance,
              coalesce((SELECT sum(amount_micro_usd) FROM credit_reservations WHERE account_id = $1 AND status = 'reserved'), 0) AS reserved`,
      [accountId],
    );
    const row = z.object({ balance: Column.int, reserved: Column.int }).parse(rows[0]);
    return { balanceMicroUsd: row.balance, reservedMicroUsd: row.reserved };
  }

  /** The account's oldest `limit` reservations not yet ended. */
  async outstanding(accountId: string, limit: number): Promise<OutstandingReservation[]> {
    const rows = await this.db.query(
      `SELECT id, amount_micro_usd, request_id, created_at, expires_at FROM credit_reservations
        WHERE account_id = $1 AND status = 'reserved' ORDER BY created_at, id LIMIT $2`,
      [accountId, limit],
    );
    return rows.map((raw) => {
      const row = OutstandingRow.parse(raw);
      return { id: row.id, amountMicroUsd: row.amount_micro_usd, requestId: row.request_id, createdAt: row.created_at, expiresAt: row.expires_at };
    });
  }
}

/** Amounts are positive integers of micro-USD (the tables' CHECKs say the same, later and less clearly). */
function positive(amountMicroUsd: number, what: string): void {
  if (!Number.isSafeInteger(amountMicroUsd) || amountMicroUsd <= 0) throw new RangeError(`${what} must be a positive integer of micro-USD, got ${amountMicroUsd}`);
}
