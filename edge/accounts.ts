/**
 * The signed-in user's account (runs in workerd), for every route that takes a user's access token:
 * key management, trainings and the image session. Written once, so that every such route treats a
 * disabled account alike: 401 `account_disabled`, as an API key of that account is answered.
 *
 *     const accountId = await userAccount(c, { create: true });   // made on first use, as the first key makes it
 *     const maybe = await userAccount(c, { create: false });       // null: this user has no account yet
 */
import type { Context } from "hono";
import { z } from "zod";
import { Column } from "../server-shared/db.ts";
import { ServiceError } from "../server-shared/errors.ts";
import type { Account, AppEnv, User } from "./env.ts";
import { services } from "./services.ts";

export async function userAccount(c: Context<AppEnv>, opts: { create: true; user?: User }): Promise<string>;
export async function userAccount(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<string | null>;
export async function userAccount(c: Context<AppEnv>, opts: { create: boolean; user?: User }): Promise<string | null> {
  const { issuer, subject } = opts.user ?? c.get("user");
  const { sql } = services(c.env);
  const rows = opts.create
    ? await sql.query(
        `INSERT INTO accounts (idp_issuer, idp_subject) VALUES ($1, $2)
         ON CONFLICT (idp_issuer, idp_subject) DO UPDATE SET idp_subject = EXCLUDED.idp_subject
         RETURNING id, status`,
        [issuer, subject],
      )
    : await sql.query("SELECT id, status FROM accounts WHERE idp_issuer = $1 AND idp_subject = $2", [issuer, subject]);
  const row = rows[0];
  if (!row) return null;
  if (row.status !== "active") throw new ServiceError("account_disabled", "this account is disabled");
  return String(row.id);
}

const AccountRow = z.object({
  id: z.string(),
  status: z.enum(["active", "disabled"]),
  requests_per_second: Column.int.nullable(),
  tokens_per_second: Column.int.nullable(),
  max_active_batches: Column.int.nullable(),
  max_batch_storage_bytes: Column.int.nullable(),
});

/** The account `id` with its quota settings, read fresh as an API key's account is (a session route's per-second quotas). */
export async function accountWithSettings(c: Context<AppEnv>, id: string): Promise<Account> {
  const [row] = await services(c.env).sql.query(
    "SELECT id, status, requests_per_second, tokens_per_second, max_active_batches, max_batch_storage_bytes FROM accounts WHERE id = $1",
    [id],
  );
  const account = AccountRow.parse(row);
  if (account.status !== "active") throw new ServiceError("account_disabled", "this account is disabled");
  return account;
}
