/**
 * `npm run account -- <command>`: account settings and status, for operators (runs on an operator's
 * machine against DATABASE_URL, or against the running `npm start` stack when it is unset).
 *
 *   npm run account -- show <account>
 *   npm run account -- set <account> --requests-per-second 5 --tokens-per-second 20000
 *   npm run account -- set <account> --max-active-batches none     (none clears a quota)
 *   npm run account -- disable <account>
 *   npm run account -- enable <account>
 *   npm run account -- credit <account> 5 --note "pilot"     (grants $5 of image credit; the note is optional)
 *
 * <account> is the account's UUID or its user's identity-provider subject (e.g. dev-user). Changes
 * apply to every key of the account on its next request. `show` includes the account's image credit
 * (contract/credit.ts) and its oldest reservations not yet ended.
 */
import pg from "pg";
import { runOperatorCommand } from "./command.ts";
import { QUOTA_SETTINGS, type AccountStatus, type QuotaSetting } from "../server-shared/accounts.ts";
import { CreditStore } from "../server-shared/credit.ts";
import { sent, type Db, type Row } from "../server-shared/db.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export type SettingsChange = Partial<Record<QuotaSetting, number | null>>;

/** Parses `--requests-per-second 5 --tokens-per-second none ...`; throws with a usage message. */
export function parseSettings(args: string[]): SettingsChange {
  const change: SettingsChange = {};
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i] ?? "";
    const setting = QUOTA_SETTINGS.find((name) => `--${name.replaceAll("_", "-")}` === flag);
    if (!setting) throw new Error(`unknown setting ${flag}; known: ${QUOTA_SETTINGS.map((n) => `--${n.replaceAll("_", "-")}`).join(", ")}`);
    const raw = args[i + 1];
    if (raw === undefined) throw new Error(`${flag} needs a value (a positive integer, or none)`);
    if (raw === "none") change[setting] = null;
    else if (/^[1-9][0-9]{0,17}$/.test(raw) && Number.isSafeInteger(Number(raw))) change[setting] = Number(raw);
    else throw new Error(`${flag} must be a positive integer or none, got ${raw}`);
  }
  if (Object.keys(change).length === 0) throw new Error("set needs at least one setting");
  return change;
}

export interface CreditGrant {
  amountMicroUsd: number;
  note: string;
}

/** Parses `<usd> [--note text]` (`npm run account -- credit <account> ...`); throws with a usage message. */
export function parseCredit(args: string[]): CreditGrant {
  const [usd, ...flags] = args;
  if (usd === undefined) throw new Error("credit needs an amount of US dollars, e.g. 5 or 0.25");
  let note = "operator grant";
  for (let i = 0; i < flags.length; i += 2) {
    if (flags[i] !== "--note") throw new Error(`unknown option ${flags[i]}; known: --note`);
    const text = flags[i + 1];
    if (!text?.trim()) throw new Error("--note needs a text");
    note = text;
  }
  return { amountMicroUsd: microUsdOf(usd), note };
}

/** The micro-USD of a decimal dollar amount, made from its digits so that no float rounds it. */
function microUsdOf(usd: string): number {
  const match = /^([0-9]+)(?:\.([0-9]{1,6}))?$/.exec(usd);
  const micro = match ? Number(match[1]) * 1_000_000 + Number((match[2] ?? "").padEnd(6, "0")) : NaN;
  if (!Number.isSafeInteger(micro) || micro <= 0) {
    throw new Error(`credit must be an amount of US dollars above 0 with at most 6 decimals (e.g. 5 or 0.25), got ${usd}`);
  }
  return micro;
}

function accountFilter(account: string): { where: string; value: string } {
  return UUID.test(account) ? { where: "id = $1::uuid", value: account } : { where: "idp_subject = $1", value: account };
}

const SHOW = `id, idp_subject AS subject, status, ${QUOTA_SETTINGS.join(", ")}`;

export async function setSettings(db: pg.ClientBase, account: string, change: SettingsChange): Promise<Record<string, unknown>> {
  const { where, value } = accountFilter(account);
  const names = Object.keys(change) as QuotaSetting[];
  const assignments = names.map((name, i) => `${name} = $${i + 2}`).join(", ");
  const { rows } = await db.query(`UPDATE accounts SET ${assignments} WHERE ${where} RETURNING ${SHOW}`, [value, ...names.map((n) => change[n])]);
  return single(rows, account);
}

export async function setStatus(db: pg.ClientBase, account: string, status: AccountStatus): Promise<Record<string, unknown>> {
  const { where, value } = accountFilter(account);
  const { rows } = await db.query(`UPDATE accounts SET status = $2 WHERE ${where} RETURNING ${SHOW}`, [value, status]);
  return single(rows, account);
}

/** How many reservations not yet ended `show` lists (the total of all of them is `reserved_micro_usd`). */
const SHOWN_RESERVATIONS = 20;

export async function showAccount(db: pg.ClientBase, account: string): Promise<Record<string, unknown>> {
  const { where, value } = accountFilter(account);
  const { rows } = await db.query(`SELECT ${SHOW} FROM accounts WHERE ${where}`, [value]);
  const shown = single(rows, account);
  const credit = new CreditStore(clientDb(db));
  const id = String(shown.id);
  const { balanceMicroUsd, reservedMicroUsd } = await credit.balance(id);
  const reservations = await credit.outstanding(id, SHOWN_RESERVATIONS);
  return {
    ...shown,
    credit: {
      balance_micro_usd: balanceMicroUsd,
      reserved_micro_usd: reservedMicroUsd,
      oldest_reservations: reservations.map((r) => ({ id: r.id, amount_micro_usd: r.amountMicroUsd, request_id: r.requestId, created_at: r.createdAt, expires_at: r.expiresAt })),
    },
  };
}

/** Grants image credit to the account: the ledger row and the balance together. */
export async function grantCredit(db: pg.ClientBase, account: string, grant: CreditGrant): Promise<Record<string, unknown>> {
  const { where, value } = accountFilter(account);
  const { rows } = await db.query(`SELECT id, idp_subject AS subject FROM accounts WHERE ${where}`, [value]);
  const { id, subject } = single(rows, account);
  const balance = await new CreditStore(clientDb(db)).grant(String(id), grant.amountMicroUsd, grant.note);
  return { id, subject, granted_micro_usd: grant.amountMicroUsd, note: grant.note, balance_micro_usd: balance };
}

/** The operator's one connection as a `Db`, so that the server's stores run on it unchanged. */
function clientDb(client: pg.ClientBase): Db {
  return {
    query: async (text, params) => {
      const s = sent(text, params);
      return (await client.query(s.text, s.params)).rows;
    },
    async transaction(statements) {
      await client.query("BEGIN");
      try {
        const results: Row[][] = [];
        for (const piece of statements) {
          const s = sent(piece);
          results.push((await client.query(s.text, s.params)).rows);
        }
        await client.query("COMMIT");
        return results;
      } catch (err) {
        await client.query("ROLLBACK");
        throw err;
      }
    },
  };
}

function single(rows: Record<string, unknown>[], account: string): Record<string, unknown> {
  if (rows.length === 0) throw new Error(`no account ${account}`);
  if (rows.length > 1) throw new Error(`${account} names ${rows.length} accounts (one per identity provider); use the account id`);
  return rows[0]!;
}

async function main(db: pg.Client, argv: string[]): Promise<number> {
  const [command, account, ...rest] = argv;
  if (!command || !account || !["show", "set", "disable", "enable", "credit"].includes(command)) {
    console.error(
      "usage: npm run account -- show|set|disable|enable|credit <account id or subject> [--requests-per-second N|none ...] [<usd> --note text]",
    );
    return 2;
  }
  const result =
    command === "show" ? await showAccount(db, account)
    : command === "set" ? await setSettings(db, account, parseSettings(rest))
    : command === "credit" ? await grantCredit(db, account, parseCredit(rest))
    : await setStatus(db, account, command === "disable" ? "disabled" : "active");
  console.log(JSON.stringify(result, null, 2));
  return 0;
}

if (import.meta.main) await runOperatorCommand((db) => main(db, process.argv.slice(2)));
