/**
 * `npm run account -- <command>`: account settings and status, for operators (runs on an operator's
 * machine against DATABASE_URL, or against the running `npm start` stack when it is unset).
 *
 *   npm run account -- show <account>
 *   npm run account -- set <account> --requests-per-second 5 --tokens-per-second 20000
 *   npm run account -- set <account> --max-active-batches none     (none clears a quota)
 *   npm run account -- disable <account>
 *   npm run account -- enable <account>
 *
 * <account> is the account's UUID or its user's identity-provider subject (e.g. dev-user). Changes
 * apply to every key of the account on its next request.
 */
import pg from "pg";
import { runOperatorCommand } from "./command.ts";
import { QUOTA_SETTINGS, type AccountStatus, type QuotaSetting } from "../server-shared/accounts.ts";

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

export async function showAccount(db: pg.ClientBase, account: string): Promise<Record<string, unknown>> {
  const { where, value } = accountFilter(account);
  const { rows } = await db.query(`SELECT ${SHOW} FROM accounts WHERE ${where}`, [value]);
  return single(rows, account);
}

function single(rows: Record<string, unknown>[], account: string): Record<string, unknown> {
  if (rows.length === 0) throw new Error(`no account ${account}`);
  if (rows.length > 1) throw new Error(`${account} names ${rows.length} accounts (one per identity provider); use the account id`);
  return rows[0]!;
}

async function main(db: pg.Client, argv: string[]): Promise<number> {
  const [command, account, ...rest] = argv;
  if (!command || !account || !["show", "set", "disable", "enable"].includes(command)) {
    console.error("usage: npm run account -- show|set|disable|enable <account id or subject> [--requests-per-second N|none ...]");
    return 2;
  }
  const result =
    command === "show" ? await showAccount(db, account)
    : command === "set" ? await setSettings(db, account, parseSettings(rest))
    : await setStatus(db, account, command === "disable" ? "disabled" : "active");
  console.log(JSON.stringify(result, null, 2));
  return 0;
}

if (import.meta.main) await runOperatorCommand((db) => main(db, process.argv.slice(2)));
