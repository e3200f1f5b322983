/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com), written once: the sidecar signs
 * with `signWebhook`, the TypeScript SDK's `client.webhooks.verify` checks with `verifyWebhook` (the
 * Python SDK has its own, tested against this). Web Crypto only: runs in Bun, Node, workerd, browsers.
 *
 *     const secret = newWebhookSecret();                                    // "whsec_<base64 of 32 bytes>"
 *     const signature = await signWebhook([secret], id, timestamp, body);  // "v1,<base64>"
 *     const event = await verifyWebhook(body, headers, secret);            // throws WebhookVerificationError
 */

const encoder = new TextEncoder();

/** How far a `webhook-timestamp` may be from the receiver's clock: older deliveries are refused as replays. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

export class WebhookVerificationError extends Error {
  override name = "WebhookVerificationError";
}

/** A new signing secret: `whsec_` and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${toBase64(crypto.getRandomValues(new Uint8Array(32)))}`;
}

/** The `webhook-signature` header for one attempt: `v1,<signature>` for each secret, space-separated. */
export async function signWebhook(secrets: readonly string[], id: string, timestamp: number, body: string): Promise<string> {
  const signatures = await Promise.all(secrets.map((secret) => hmac(secret, `${id}.${timestamp}.${body}`)));
  return signatures.map((signature) => `v1,${signature}`).join(" ");
}

/**
 * Checks a received webhook: the three headers are present, its timestamp is within
 * `toleranceSeconds` of `now` (a replayed old delivery fails), and one of its `v1` signatures is the
 * secret's over exactly `body` (the raw text, before any JSON parsing). Returns the parsed JSON body.
 */
export async function verifyWebhook(
  body: string,
  headers: Headers | Record<string, string | string[] | undefined>,
  secret: string,
  opts: { toleranceSeconds?: number; now?: Date } = {},
): Promise<unknown> {
  const header = (name: string): string | undefined => {
    if (headers instanceof Headers) return headers.get(name) ?? undefined;
    const found = Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
    return Array.isArray(found) ? found[0] : found;
  };
  const id = header("webhook-id");
  const timestamp = header("webhook-timestamp");
  const signatures = header("webhook-signature");
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature header");
  if (!/^\d{1,12}$/.test(timestamp)) throw new WebhookVerificationError("webhook-timestamp is not a number of seconds");
  const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  const tolerance = opts.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (Math.abs(now - Number(timestamp)) > tolerance) throw new WebhookVerificationError("webhook-timestamp is too far from now (a replay, or a clock off)");
  const expected = await hmac(secret, `${id}.${timestamp}.${body}`);
  let matched = false;
  for (const candidate of signatures.split(" ")) {
    const [version, signature] = candidate.split(",", 2);
    if (version === "v1" && signature !== undefined && constantTimeEqual(signature, expected)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError("no signature matches this secret");
  try {
    return JSON.parse(body) as unknown;
  } catch {
    throw new WebhookVerificationError("the body is not JSON");
  }
}

async function hmac(secret: string, content: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", secretBytes(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return toBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(content))));
}

function secretBytes(secret: string): Uint8Array<ArrayBuffer> {
  const base64 = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  let binary: string;
  try {
    binary = atob(base64);
  } catch {
    throw new WebhookVerificationError("the secret is not whsec_ followed by base64");
  }
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function constantTimeEqual(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.min(a.length, b.length); i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
