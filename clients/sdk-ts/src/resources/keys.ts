/**
 * `client.keys`: the account's API keys (POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}/revoke).
 * Key management takes the signed-in user's access token (the client's `accessToken`), never an API
 * key, like training and usage.
 *
 *     const session = new Client({ accessToken, baseURL });
 *     const key = await session.keys.create({ name: "ci", scope: "decisions", models: ["svc-shared"], expiresAt: new Date(Date.now() + 86_400_000) });
 *     key.secret;                        // svc_<id>_<secret>: shown this once, never again
 *     const { keys } = await session.keys.list();   // metadata, newest first; never a secret
 *     await session.keys.revoke(key.id);
 *
 * A key may be created for less than everything its account can do: until `expiresAt` (then every
 * call with it is an AuthenticationError, 401 `expired_key`), for a `scope` of routes (`decisions`,
 * or `decisions_and_batches`), and for the `models` its calls may name (otherwise a
 * PermissionDeniedError, 403 `insufficient_scope`). Left out, the key can do what its account can,
 * for ever. The service checks every field (an UnprocessableEntityError, 422, names what is wrong);
 * the client sends them as given.
 */
import type { CreatedKey, KeyList, KeyMetadata, KeyScope } from "../../../../contract/keys.ts";
import { withRequestId, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";
import { InputError } from "../errors.ts";

export interface CreateKeyParams {
  /** The key's name in listings and usage (1 to 128 characters, not blank). */
  name: string;
  /** When the key stops working: a Date, or an RFC 3339 time with its offset (`2026-12-31T00:00:00Z`), in the future. Never when absent. */
  expiresAt?: Date | string | undefined;
  /** What the key may call: `decisions` (decisions, models, image assets and credit) or `decisions_and_batches`; everything when absent. */
  scope?: KeyScope | undefined;
  /** The model names (aliases or release ids) its decisions and batch records may name, 1 to 16; any when absent. */
  models?: readonly string[] | undefined;
}

export class Keys {
  constructor(private readonly transport: Transport) {}

  /**
   * Creates an API key of the account; the answer is its metadata and its `secret`, which the
   * service shows this once (keep it; only its digest is stored).
   *
   *     const key = await session.keys.create({ name: "nightly batches", scope: "decisions_and_batches", expiresAt: "2026-12-31T00:00:00Z" });
   *     const worker = new Client({ apiKey: key.secret, baseURL });
   */
  async create(params: CreateKeyParams, options?: RequestOptions): Promise<WithRequestId<CreatedKey>> {
    const { name, expiresAt, scope, models } = params;
    const body = { name, expires_at: expiresAt === undefined ? undefined : isoTime(expiresAt), scope, models };
    return withRequestId(await this.transport.request<CreatedKey>({ method: "POST", path: "/v1/keys", auth: "access_token", body: JSON.stringify(body) }, options));
  }

  /**
   * Every key of the account, newest first, with its metadata: `status` (`active`, `revoked` or
   * `expired`), `expires_at`, `scope` and `models` (null: no limit). Never a secret.
   *
   *     const { keys } = await session.keys.list();
   *     for (const key of keys) console.log(key.name, key.id, key.status, key.scope ?? "everything");
   */
  async list(options?: RequestOptions): Promise<WithRequestId<KeyList>> {
    return withRequestId(await this.transport.request<KeyList>({ method: "GET", path: "/v1/keys", auth: "access_token" }, options));
  }

  /**
   * Revokes a key of the account (the `id` listings show): every later call with it is an
   * AuthenticationError (401 `revoked_key`). Repeatable; another account's or an unknown key is a
   * NotFoundError.
   *
   *     const revoked = await session.keys.revoke("abcdefghijklmnopqrstuvwxyz");
   *     revoked.status;   // "revoked"
   */
  async revoke(id: string, options?: RequestOptions): Promise<WithRequestId<KeyMetadata>> {
    const path = `/v1/keys/${encodeURIComponent(id)}/revoke`;
    return withRequestId(await this.transport.request<KeyMetadata>({ method: "POST", path, auth: "access_token", body: "{}" }, options));
  }
}

/** A Date as an ISO string (UTC, `Z`); a string as given, for the service to check. */
function isoTime(value: Date | string): string {
  if (typeof value === "string") return value;
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) throw new InputError("expiresAt is a valid Date, or an RFC 3339 time with its offset");
  return value.toISOString();
}
