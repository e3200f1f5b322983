/**
 * API keys and key management on the wire.
 *
 * A secret looks like `svc_<id>_<secret>`: `id` is 16 random bytes in lowercase base32 (26
 * characters, the lookup identifier shown in listings), `secret` is 32 random bytes (256 bits) in
 * base64url (43 characters). Only the SHA-256 digest of the whole string is stored.
 */
import { z } from "zod";
import { looseFields } from "./fields.ts";

export const KEY_NAME_MAX = 128;
export const API_KEY_PATTERN = /^svc_([a-z2-7]{26})_([A-Za-z0-9_-]{43})$/;
export const KEY_ID_PATTERN = /^[a-z2-7]{26}$/;

/**
 * A character that String.prototype.trim keeps: anything but ECMAScript's white space and line
 * terminators, listed rather than written `\S`, so that the published pattern means the same in
 * every regular-expression dialect a client validates with.
 */
const NOT_BLANK = /[^\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;

export const CreateKeyRequest = looseFields({
  // The length is checked as sent, then the name is kept trimmed: what the document says is what is refused.
  name: z
    .string({ error: (issue) => (issue.input === undefined ? "name is required" : "name must be a string") })
    .min(1, { error: "name must not be empty", abort: true })
    .max(KEY_NAME_MAX, `name must be at most ${KEY_NAME_MAX} characters`)
    .regex(NOT_BLANK, "name must not be blank")
    .trim(),
});
export type CreateKeyRequest = z.infer<typeof CreateKeyRequest>;

export const KeyMetadata = z.object({
  id: z.string(),
  name: z.string(),
  status: z.enum(["active", "revoked"]),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
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
