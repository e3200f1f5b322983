/** Small Web Crypto helpers that run the same in workerd, Bun and Node. */

const encoder = new TextEncoder();

export async function sha256Hex(data: string | Uint8Array<ArrayBuffer>): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", typeof data === "string" ? encoder.encode(data) : data);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Compares two secrets in time independent of where they differ: both sides are hashed first, so
 * neither the position of the first difference nor the lengths leak through timing.
 */
export async function secretsEqual(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([sha256Hex(a), sha256Hex(b)]);
  return digestsEqual(x, y);
}

/** Compares two hex digests without an early exit; digests of different lengths are unequal. */
export function digestsEqual(x: string, y: string): boolean {
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.min(x.length, y.length); i++) diff |= x.charCodeAt(i) ^ y.charCodeAt(i);
  return diff === 0;
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | null | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer ([^\s]+)$/.exec(header);
  return match?.[1] ?? null;
}
