/**
 * API-key authentication for models, decisions and bulk (runs in workerd). Every request looks the
 * key up by its identifier and re-reads revocation and account status in the same query, so a
 * revoked key or a disabled account fails on its very next request. The digest comparison is
 * constant-time. The decisions route reads the key and the model in one query (`presentedKey`,
 * `KEY_COLUMNS`, `acceptKey`), or answers from what it kept of them (auth/key-cache.ts), which the
 * sidecar confirms in Postgres before the answer is given; every other route uses `apiKeyAuth`.
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { z } from "zod";
import { Column } from "../../server-shared/db.ts";
import { digestsEqual, bearerToken, sha256Hex } from "../../server-shared/crypto.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { KeyScope, parseApiKey } from "../../contract/keys.ts";
import { AccountRow, accountColumns } from "../accounts.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** A presented API key, parsed without I/O: its identifier and the whole secret. Throws 401 when absent or malformed. */
export function presentedKey(c: Context<AppEnv>): { id: string; token: string } {
  const token = bearerToken(c.req.header("authorization"));
  if (!token) throw new ServiceError("missing_credentials", "missing API key: send Authorization: Bearer <API key>");
  const key = parseApiKey(token);
  if (!key) {
    if (JWT_SHAPE.test(token)) {
      throw new ServiceError("wrong_credential_kind", "a user access token cannot be used here; use an API key");
    }
    throw new ServiceError("invalid_credentials", "malformed API key");
  }
  return { id: key.id, token };
}

/** The columns `acceptKey` reads, from `api_keys k JOIN accounts a`. */
export const KEY_COLUMNS = `k.digest, k.revoked_at, k.expires_at <= now() AS key_expired, k.expires_at AS key_expires_at, k.scope AS key_scope, k.models AS key_models, ${accountColumns("a")}`;

/**
 * Checks a key row read in this request, or kept from an earlier one (auth/key-cache.ts: the sidecar
 * confirms it), for the presented secret (digest in constant time), revocation, expiry and account
 * status, and sets the request's key and account; throws 401 otherwise. Returns the key's expiry
 * (ms since the epoch, null: none).
 */
export async function acceptKey(c: Context<AppEnv>, key: { id: string; token: string }, raw: Record<string, unknown> | undefined): Promise<{ expiresAt: number | null }> {
  const presented = await sha256Hex(key.token);
  const row = raw && KeyAccountRow.parse(raw);
  if (!row || !digestsEqual(presented, row.digest)) throw new ServiceError("invalid_credentials", "invalid API key");
  if (row.revoked_at !== null) throw new ServiceError("revoked_key", "this API key has been revoked");
  const expiresAt = row.key_expires_at === null ? null : Date.parse(row.key_expires_at);
  if (row.key_expired || (expiresAt !== null && expiresAt <= Date.now())) throw new ServiceError("expired_key", "this API key has expired; create a new one");
  if (row.status !== "active") throw new ServiceError("account_disabled", "this account is disabled");
  const { digest: _digest, revoked_at: _revoked, key_expired: _expired, key_expires_at: _expires, key_scope: scope, key_models: models, ...account } = row;
  c.set("keyId", key.id);
  c.set("keyLimits", { scope, models });
  c.set("account", account);
  return { expiresAt };
}

/** Refuses (403 insufficient_scope) a key created for decisions only on a batch route. */
export const batchScope = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("keyLimits").scope === "decisions") {
    throw new ServiceError("insufficient_scope", "this API key was created for decisions only; batches need a key with the scope decisions_and_batches (or none)");
  }
  await next();
});

/** Refuses (403 insufficient_scope) a model name the key was not created for. */
export function checkModelName(c: Context<AppEnv>, name: string): void {
  const { models } = c.get("keyLimits");
  if (models !== null && !models.includes(name)) {
    throw new ServiceError("insufficient_scope", `this API key may name only these models: ${models.map((m) => JSON.stringify(m)).join(", ")}`);
  }
}

/** Reads the presented key's row and accepts it (or throws 401). */
export async function verifyKey(c: Context<AppEnv>, key: { id: string; token: string }): Promise<void> {
  const rows = await c.var.timings.time("key", () =>
    services(c.env).sql.query(`SELECT ${KEY_COLUMNS} FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`, [key.id]),
  );
  await acceptKey(c, key, rows[0]);
}

export const apiKeyAuth = createMiddleware<AppEnv>(async (c, next) => {
  await verifyKey(c, presentedKey(c));
  await next();
});

/** The key's row with its account's, as KEY_COLUMNS reads it. */
const KeyAccountRow = AccountRow.extend({
  digest: z.string(),
  revoked_at: Column.time.nullable(),
  key_expired: z.boolean().nullable(),
  key_expires_at: Column.time.nullable(),
  key_scope: KeyScope.nullable(),
  key_models: z.array(z.string()).nullable(),
});
