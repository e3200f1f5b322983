/**
 * Test helpers for driving the shared stack over real HTTP (runs only in tests). Every secret a test
 * obtains goes through `remember`, so the end-of-run log scan looks for it.
 */
import { createHash } from "node:crypto";
import { appendFileSync } from "node:fs";
import pg from "pg";
import { inject } from "vitest";
import { CreatedKey } from "../../contract/keys.ts";
import { REQUEST_ID_HEADER } from "../../contract/limits.ts";
import { getUserAccessToken } from "../../local/user-token.ts";

export const stack = () => inject("stack");

export function remember(secret: string): string {
  appendFileSync(stack().ledgerPath, `${secret}\n`);
  return secret;
}

export interface Reply<T = Record<string, unknown>> {
  status: number;
  body: T;
  headers: Headers;
  requestId: string | null;
}

export async function call<T = Record<string, unknown>>(
  path: string,
  opts: { method?: string; token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  const hasBody = opts.body !== undefined || opts.rawBody !== undefined;
  if (hasBody) headers["content-type"] = "application/json";
  const method = opts.method ?? (hasBody ? "POST" : "GET");
  const send = () => fetch(`${stack().baseUrl}${path}`, { method, headers, body: opts.rawBody ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body)) });
  // A GET sent on a kept-alive connection the server closed at that moment (its idle timeout, met
  // when a loaded machine stalls this process) fails before any answer: sent again once, as HTTP
  // clients retry an idempotent request (RFC 9110 9.2.2). Anything else fails the test.
  const res = await send().catch((err: unknown) => {
    if (method === "GET" && (err as { cause?: { code?: string } }).cause?.code === "UND_ERR_SOCKET") return send();
    throw err;
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON: the assertion that follows will say so */
  }
  return { status: res.status, body: body as T, headers: res.headers, requestId: res.headers.get(REQUEST_ID_HEADER) };
}

let logins = 0;

/** A fresh user of the local identity provider, signed in with the real PKCE flow. */
export async function signIn(login = `user-${process.pid}-${Date.now()}-${++logins}`): Promise<{ login: string; token: string }> {
  const token = await getUserAccessToken({ issuer: stack().issuer, login });
  return { login, token: remember(token) };
}

export async function createKey(userToken: string, name = "test key"): Promise<CreatedKey> {
  const reply = await call("/v1/keys", { token: userToken, body: { name } });
  if (reply.status !== 201) throw new Error(`key creation answered ${reply.status}: ${JSON.stringify(reply.body)}`);
  const key = CreatedKey.parse(reply.body);
  remember(key.secret);
  // A digest is not a secret, but it has no business in a log either.
  remember(createHash("sha256").update(key.secret).digest("hex"));
  return key;
}

/** A new account (a new user with one key). */
export async function newAccount(): Promise<{ login: string; userToken: string; key: CreatedKey; accountId: string }> {
  const { login, token } = await signIn();
  const key = await createKey(token);
  const rows = await query<{ account_id: string }>("SELECT account_id FROM api_keys WHERE id = $1", [key.id]);
  return { login, userToken: token, key, accountId: rows[0]!.account_id };
}

export async function query<T extends pg.QueryResultRow = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  const db = new pg.Client({ connectionString: stack().databaseUrl });
  await db.connect();
  try {
    return (await db.query<T>(text, params)).rows;
  } finally {
    await db.end();
  }
}

/** Runs an operator function (ops/*.ts) against the stack's database. */
export async function withDb<T>(run: (db: pg.Client) => Promise<T>): Promise<T> {
  const db = new pg.Client({ connectionString: stack().databaseUrl });
  await db.connect();
  try {
    return await run(db);
  } finally {
    await db.end();
  }
}

/**
 * The usage rows of a request. The sidecar records usage after answering, so a row may land a few
 * milliseconds after the 200: this polls until `count` rows are there or 3 s have passed (which is
 * also how long a test waits before it believes that no row will come).
 */
export async function usageRows<T extends pg.QueryResultRow = Record<string, unknown>>(requestId: string, count = 1, columns = "*"): Promise<T[]> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const rows = await query<T>(`SELECT ${columns} FROM usage_records WHERE request_id = $1 ORDER BY id`, [requestId]);
    if (rows.length >= count || Date.now() > deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
