/**
 * The signed-in user's account (runs in workerd), for every route that takes a user's access token:
 * key management, trainings and the image session. Written once, so that every such route treats a
 * disabled account alike: 401 `account_disabled`, as an API key of that account is answered.
 *
 *     const accountId = await userAccount(c, { create: true });   // made on first use, as the first key makes it
 *     const maybe = await userAccount(c, { create: false });       // null: this user has no account yet
 *     const account = await userAccountWithSettings(c, { create: true });  // with its quota settings
 */
import type { Context } from "hono";
import { z } from "zod";
import { ACCOUNT_STATUSES } from "../server-shared/accounts.ts";
import { Column } from "../server-shared/db.ts";
import { ServiceError } from "../server-shared/errors.ts";
import type { Account, AppEnv, User } from "./env.ts";
import { services } from "./services.ts";

export async function userAccount(c: Context<AppEnv>, opts: { create: true; user?: User }): Promise<string>;
export async function userAccount(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<string | null>;
export async function userAccount(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<string | null> {
  return (await userAccountWithSettings(c, opts))?.id ?? null;
}

/**
 * The signed-in user's account with its quota settings (env.ts Account), in the same one statement:
 * what a session route's per-second quotas read, as an API key's route reads its account with the key.
 */
export async function userAccountWithSettings(c: Context<AppEnv>, opts: { create: true; user?: User }): Promise<Account>;
export async function userAccountWithSettings(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<Account | null>;
export async function userAccountWithSettings(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<Account | null> {
  const { issuer, subject } = opts.user ?? c.get("user");
  const { sql } = services(c.env);
  const rows = opts.create
    ? await sql.query(
        `INSERT INTO accounts AS a (idp_issuer, idp_subject) VALUES ($1, $2)
         ON CONFLICT (idp_issuer, idp_subject) DO UPDATE SET idp_subject = EXCLUDED.idp_subject
         RETURNING ${accountColumns("a")}`,
        [issuer, subject],
      )
    : await sql.query(`SELECT ${accountColumns("a")} FROM accounts a WHERE a.idp_issuer = $1 AND a.idp_subject = $2`, [issuer, subject]);
  if (!rows[0]) return null;
  const account = AccountRow.parse(rows[0]);
  if (account.status !== "active") throw new ServiceError("account_disabled", "this account is disabled");
  return account;
}

/** An account with its quota settings (env.ts Account), as accountColumns reads it; an API key's row extends it (auth/api-key.ts). */
export const AccountRow = z.object({
  id: z.string(),
  status: z.enum(ACCOUNT_STATUSES),
  requests_per_second: Column.int.nullable(),
  tokens_per_second: Column.int.nullable(),
  max_active_batches: Column.int.nullable(),
  max_batch_storage_bytes: Column.int.nullable(),
});

/** The columns AccountRow reads, from the accounts table aliased `alias`. */
export function accountColumns(alias: string): string {
  return Object.keys(AccountRow.shape)
    .map((column) => `${alias}.${column}`)
    .join(", ");
}
