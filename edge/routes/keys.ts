/**
 * Key management with a user access token (runs in workerd):
 *
 *   POST /v1/keys              {name, expires_at?, scope?, models?}  -> 201 key metadata + secret (shown this once)
 *   GET  /v1/keys                      -> {keys: [metadata, ...]}, newest first
 *   POST /v1/keys/{id}/revoke  {}      -> revoked key metadata (repeatable)
 *
 * The account is created with its first key. A key of another account answers 404, like a key that
 * does not exist. Neither a listing nor an error ever contains a secret or a digest.
 */
import { Hono } from "hono";
import { z } from "zod";
import { Column } from "../../server-shared/db.ts";
import { sha256Hex } from "../../server-shared/crypto.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { CreateKeyRequest, KeyScope, type CreatedKey, type KeyMetadata } from "../../contract/keys.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import { pathParam } from "../params.ts";
import { quoteName } from "../../contract/json.ts";
import { LIMITS } from "../../contract/limits.ts";
import { userAccount } from "../accounts.ts";
import { userAuth } from "../auth/user.ts";
import { readJson } from "../../server-shared/body.ts";
import type { AppEnv } from "../env.ts";
import { services } from "../services.ts";

export const keys = new Hono<AppEnv>();
keys.use("/v1/keys", userAuth);
keys.use("/v1/keys/*", userAuth);

const METADATA = "id, name, created_at, revoked_at, expires_at, scope, models, expires_at <= now() AS expired";

keys.post("/v1/keys", async (c) => {
  const request = await readJson(c, CreateKeyRequest, { maxBytes: LIMITS.controlBodyBytes });
  const expiresAt = request.expires_at === undefined ? null : new Date(request.expires_at);
  if (expiresAt && expiresAt.getTime() <= Date.now()) throw new ServiceError("invalid_request", "expires_at must be in the future");
  const accountId = await userAccount(c, { create: true });
  const { id, secret } = newKey();
  // Still active when the key is written: an account disabled in between gets no key.
  const rows = await services(c.env).sql.query(
    `INSERT INTO api_keys (id, account_id, name, digest, expires_at, scope, models)
     SELECT $1, a.id, $2, $3, $4, $5, $6 FROM accounts a WHERE a.id = $7 AND a.status = 'active'
     RETURNING ${METADATA}`,
    [id, request.name, await sha256Hex(secret), expiresAt?.toISOString() ?? null, request.scope ?? null, request.models ?? null, accountId],
  );
  if (!rows[0]) throw new ServiceError("account_disabled", "this account is disabled");
  return c.json({ ...metadata(rows[0]), secret } satisfies CreatedKey, 201);
});

keys.get("/v1/keys", async (c) => {
  const user = c.get("user");
  const rows = await services(c.env).sql.query(
    `SELECT ${METADATA} FROM api_keys
      WHERE account_id = (SELECT id FROM accounts WHERE idp_issuer = $1 AND idp_subject = $2)
      ORDER BY created_at DESC, id`,
    [user.issuer, user.subject],
  );
  return c.json({ keys: rows.map(metadata) });
});

keys.post("/v1/keys/:id/revoke", async (c) => {
  const id = pathParam(c, PARAMETERS.keyId);
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const user = c.get("user");
  const rows = id !== null
    ? await services(c.env).sql.query(
        `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
          WHERE id = $1 AND account_id = (SELECT id FROM accounts WHERE idp_issuer = $2 AND idp_subject = $3)
          RETURNING ${METADATA}`,
        [id, user.issuer, user.subject],
      )
    : [];
  if (!rows[0]) throw new ServiceError("not_found", `no key ${quoteName(c.req.param("id"))} in this account`);
  return c.json(metadata(rows[0]));
});

const BASE32 = "abcdefghijklmnopqrstuvwxyz234567";

/** A new key: 16 random bytes of identifier (base32) and 32 bytes (256 bits) of secret (base64url). */
function newKey(): { id: string; secret: string } {
  const idBytes = crypto.getRandomValues(new Uint8Array(16));
  let bits = 0;
  let value = 0;
  let id = "";
  for (const byte of idBytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      id += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) id += BASE32[(value << (5 - bits)) & 31];
  const secretBytes = crypto.getRandomValues(new Uint8Array(32));
  const material = btoa(String.fromCharCode(...secretBytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  return { id, secret: `svc_${id}_${material}` };
}

/** A key's row as METADATA reads it. */
const KeyRow = z.object({
  id: z.string(),
  name: z.string(),
  created_at: Column.time,
  revoked_at: Column.time.nullable(),
  expires_at: Column.time.nullable(),
  scope: KeyScope.nullable(),
  models: z.array(z.string()).nullable(),
  expired: z.boolean().nullable(),
});

function metadata(raw: Record<string, unknown>): KeyMetadata {
  const { expired, ...row } = KeyRow.parse(raw);
  return { ...row, status: row.revoked_at !== null ? "revoked" : expired ? "expired" : "active" };
}
