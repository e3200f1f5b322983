/**
 * API keys and key management on the wire.
 *
 * A secret looks like `svc_<id>_<secret>`: `id` is 16 random bytes in lowercase base32 (26
 * characters, the lookup identifier shown in listings), `secret` is 32 random bytes (256 bits) in
 * base64url (43 characters). Only the SHA-256 digest of the whole string is stored.
 *
 * A key may be created for less than everything its account can do: until `expires_at` (then 401
 * `expired_key`), for a `scope` of routes, and for the `models` it may name (otherwise 403
 * `insufficient_scope`), checked on every request as revocation is. A key created without them (every
 * key made before they existed) can do what its account can, for ever.
 *
 *     POST /v1/keys {"name": "ci", "expires_at": "2026-12-31T00:00:00Z", "scope": "decisions", "models": ["svc-shared"]}
 */
import { z } from "zod";
import { fields } from "./fields.ts";

export const KEY_NAME_MAX = 128;
export const API_KEY_PATTERN = /^svc_([a-z2-7]{26})_([A-Za-z0-9_-]{43})$/;
export const KEY_ID_PATTERN = /^[a-z2-7]{26}$/;

/**
 * A character that String.prototype.trim keeps: anything but ECMAScript's white space and line
 * terminators, listed rather than written `\S`, so that the published pattern means the same in
 * every regular-expression dialect a client validates with.
 */
const NOT_BLANK = /[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

/**
 * What a scoped key may call: `decisions` (decisions, models, image assets and credit), or
 * `decisions_and_batches` (and bulk batches). No scope: everything an API key can.
 */
export const KEY_SCOPES = ["decisions", "decisions_and_batches"] as const;
export const KeyScope = z.enum(KEY_SCOPES);
export type KeyScope = z.infer<typeof KeyScope>;
/** The most model names a key may be limited to. */
export const KEY_MODELS_MAX = 16;

export const CreateKeyRequest = fields({
  // The length is checked as sent, then the name is kept trimmed: what the document says is what is refused.
  name: z
    .string({ error: (issue) => (issue.input === undefined ? "name is required" : "name must be a string") })
    .min(1, { error: "name must not be empty", abort: true })
    .max(KEY_NAME_MAX, `name must be at most ${KEY_NAME_MAX} characters`)
    .regex(NOT_BLANK, "name must not be blank")
    .trim(),
  /** When the key stops working (RFC 3339 with an offset, in the future); never when absent. */
  expires_at: z.iso.datetime({ offset: true, error: "expires_at must be an RFC 3339 date-time with its offset, e.g. 2026-12-31T00:00:00Z" }).optional(),
  scope: KeyScope.optional(),
  /** The model names (aliases or release ids) its decisions and batch records may name; any when absent. */
  models: z
    .array(z.string().min(1, "a model name must not be empty").max(200, "a model name is at most 200 characters"), { error: "models must be an array of model names" })
    .min(1, "models must name at least one model (leave it out for any)")
    .max(KEY_MODELS_MAX, `models may name at most ${KEY_MODELS_MAX} models`)
    .optional(),
});
export type CreateKeyRequest = z.infer<typeof CreateKeyRequest>;

export const KeyMetadata = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(["active", "revoked", "expired"]),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  /** Null: it never expires. */
  expires_at: z.string().nullable(),
  /** Null: every route an API key can call. */
  scope: KeyScope.nullable(),
  /** Null: any model the account may use. */
  models: z.array(z.string()).nullable(),
});
export type KeyMetadata = z.infer<typeof KeyMetadata>;

/** The creation response: the only time the secret is ever shown. */
export const CreatedKey = KeyMetadata.extend({ secret: z.string().regex(API_KEY_PATTERN) });
export type CreatedKey = z.infer<typeof CreatedKey>;

export const KeyList = z.object({ keys: z.array(KeyMetadata) });
export type KeyList = z.infer<typeof KeyList>;

/** Splits a presented API key into its lookup id, or null when it does not have the key's shape. */
export function parseApiKey(token: string): { id: string } | null {
  const match = API_KEY_PATTERN.exec(token);
  return match?.[1] ? { id: match[1] } : null;
}

/**
 * GET /v1/sign-in: where the command-line tool's browser sign-in goes (a public client with
 * authorization code + PKCE and a loopback redirect), and the scope its user token needs.
 */
/** What a user's access token is asked for at sign-in (the CLI's and the console's): the key-management routes. */
export const USER_SIGN_IN_SCOPE = "openid keys";

export const SignInTarget = z.object({ issuer: z.string(), client_id: z.string(), scope: z.string() });
export type SignInTarget = z.infer<typeof SignInTarget>;
