/**
 * An API key on a benchmark's isolated stack, made as a user makes one (a signed-in user's token,
 * then POST /v1/keys), and calls with it (runs in the benchmarks only).
 *
 *     const key = await benchKey(stack, "bench-bulk");
 *     const { status, body } = await callWith(stack.baseUrl, key)("/v1/batches", { idempotency_key, input_bytes });
 */
import { CreatedKey } from "../contract/keys.ts";
import type { Stack } from "../local/stack.ts";
import { getUserAccessToken } from "../local/user-token.ts";

/** A new key's secret, for a user named `login` of the stack's identity provider. */
export async function benchKey(stack: Stack, login: string): Promise<string> {
  const token = await getUserAccessToken({ issuer: stack.idp.issuer, login });
  const res = await fetch(`${stack.baseUrl}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "bench" }),
  });
  return CreatedKey.parse(await res.json()).secret;
}

/** GET `path` (no body) or POST `body` as JSON with `key`; the status and the JSON body. */
export function callWith(baseUrl: string, key: string) {
  return async (path: string, body?: unknown): Promise<{ status: number; body: unknown }> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as unknown };
  };
}
