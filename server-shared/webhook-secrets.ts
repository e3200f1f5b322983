/**
 * Webhook signing secrets at rest (edge and sidecar; WebCrypto only, so workerd and Bun share it).
 * An endpoint's `whsec_...` secret is stored sealed with AES-256-GCM under a key of the setting
 * WEBHOOK_SECRET_KEY, which the database never holds, so a dump of it cannot sign a webhook:
 *
 *     aesgcm1:<key id>:<base64url of the 12-byte nonce, then the ciphertext and its tag>
 *
 * The endpoint's id is the associated data: a sealed secret copied onto another endpoint's row does
 * not open there. WEBHOOK_SECRET_KEY is a rotation list (`new,old`, server-shared/secret-list.ts) of
 * keys, each the base64 of 32 random bytes (`openssl rand -base64 32`): the first seals, every one
 * opens. A key's id is derived from the key (the start of its SHA-256), so the operator names none
 * and two keys can never share one. The sidecar re-seals what an older key, or the plain form of
 * before, still holds (sidecar/webhook-sealing.ts); docs/deploy.md gives the rotation steps.
 *
 *     const keys = await webhookKeyring(settings.WEBHOOK_SECRET_KEY);
 *     const stored = await keys.seal(endpointId, "whsec_...");   // "aesgcm1:3f9c...:..."
 *     await keys.open(endpointId, stored);                        // "whsec_..."
 */
import type { SecretList } from "./secret-list.ts";

const FORMAT = "aesgcm1";
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const KEY_ID_HEX = 12;
/** How secrets were stored before they were sealed: such a row opens as it is until the sidecar seals it. */
const PLAIN_PREFIX = "whsec_";

/** A stored secret that the keys at hand cannot open: sealed under a key not in the list, or altered. */
export class UnreadableWebhookSecret extends Error {
  override readonly name = "UnreadableWebhookSecret";
}

export interface WebhookKeyring {
  /** The id of the key that seals. */
  readonly currentId: string;
  /** What every secret sealed under the current key starts with. */
  readonly sealedPrefix: string;
  /** `secret` sealed under the current key for the endpoint `endpointId`. */
  seal(endpointId: string, secret: string): Promise<string>;
  /** The secret a stored value holds for `endpointId`; throws UnreadableWebhookSecret when no key here opens it. */
  open(endpointId: string, stored: string): Promise<string>;
}

/**
 * Why a key list cannot be used, naming the entry by its place and never by its value; null when
 * every entry is a key.
 */
export function webhookKeyProblem(list: SecretList): string | null {
  const bad = list.accepted.findIndex((text) => keyBytes(text) === null);
  return bad < 0 ? null : `entry ${bad + 1} of its comma-separated list is not the base64 of ${KEY_BYTES} bytes (make one with: openssl rand -base64 32)`;
}

let cached: { text: string; keyring: Promise<WebhookKeyring> } | null = null;

/** The keyring of a key list; built once per list, since importing keys takes a turn of the event loop. Throws on a bad list. */
export function webhookKeyring(list: SecretList): Promise<WebhookKeyring> {
  const text = list.accepted.join(",");
  if (cached?.text !== text) cached = { text, keyring: buildKeyring(list) };
  return cached.keyring;
}

async function buildKeyring(list: SecretList): Promise<WebhookKeyring> {
  const problem = webhookKeyProblem(list);
  if (problem) throw new Error(`setting WEBHOOK_SECRET_KEY: ${problem}`);
  const keys = await Promise.all(list.accepted.map(async (text) => importKey(keyBytes(text)!)));
  const byId = new Map(keys.map((key) => [key.id, key.key]));
  const current = keys[0]!;
  const sealedPrefix = `${FORMAT}:${current.id}:`;
  return {
    currentId: current.id,
    sealedPrefix,
    async seal(endpointId, secret) {
      const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
      const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv: nonce, additionalData: associatedData(endpointId) }, current.key, new TextEncoder().encode(secret));
      return sealedPrefix + toBase64Url(concat(nonce, new Uint8Array(sealed)));
    },
    async open(endpointId, stored) {
      if (stored.startsWith(PLAIN_PREFIX)) return stored;
      const [format, keyId, body, ...rest] = stored.split(":");
      if (format !== FORMAT || keyId === undefined || body === undefined || rest.length > 0) throw new UnreadableWebhookSecret("is in no form this version reads");
      const key = byId.get(keyId);
      if (!key) throw new UnreadableWebhookSecret(`is sealed under key ${keyId}, which WEBHOOK_SECRET_KEY does not hold`);
      try {
        const bytes = fromBase64(body);
        const opened = await crypto.subtle.decrypt({ name: "AES-GCM", iv: bytes.slice(0, NONCE_BYTES), additionalData: associatedData(endpointId) }, key, bytes.slice(NONCE_BYTES));
        return new TextDecoder().decode(opened);
      } catch {
        throw new UnreadableWebhookSecret(`does not open under key ${keyId}: altered, or sealed for another endpoint`);
      }
    },
  };
}

async function importKey(raw: Uint8Array): Promise<{ id: string; key: CryptoKey }> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const id = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, KEY_ID_HEX);
  return { id, key: await crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]) };
}

const associatedData = (endpointId: string) => new TextEncoder().encode(`webhook_endpoints/${endpointId}`);

/** A key's bytes from its base64 (standard or URL alphabet, padded or not); null unless exactly KEY_BYTES. */
function keyBytes(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return null;
  try {
    const bytes = fromBase64(text);
    return bytes.length === KEY_BYTES ? bytes : null;
  } catch {
    return null;
  }
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text.replaceAll("-", "+").replaceAll("_", "/")), (c) => c.charCodeAt(0));
}

function toBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a);
  joined.set(b, a.length);
  return joined;
}
