/**
 * What every server tier's HTTP surface shares (edge in workerd, sidecar and runtime under Bun): the
 * shared-secret gate of the internal tiers, the one error renderer, and the not-found answer.
 *
 *     app.use("/internal/*", sharedSecret(() => settings.SIDECAR_SECRET.accepted, "sidecar"));
 *     app.notFound(notFound);
 *     app.onError(errorRenderer("sidecar"));
 */
import type { Context, ErrorHandler, MiddlewareHandler, NotFoundHandler } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { errorBody, type ErrorCode } from "../contract/errors.ts";
import { stringifyJson } from "../contract/json.ts";
import { bearerToken, secretsEqual } from "./crypto.ts";
import { ServiceError } from "./errors.ts";

/**
 * Refuses any call that does not carry `Authorization: Bearer <secret>` with one of the secrets
 * `accepted` gives at the time of the call (several while one is rotated; each compared in constant time).
 */
export function sharedSecret(accepted: () => readonly string[], what: string): MiddlewareHandler {
  const atStart = accepted();
  if (atStart.length === 0 || atStart.includes("")) throw new Error(`the ${what} secret must not be empty`);
  return async (c, next) => {
    if (!(await presentsSecret(c, accepted()))) return c.json(errorBody("unauthorized", `missing or wrong ${what} secret`), 401);
    await next();
  };
}

/** Whether the call carries `Authorization: Bearer <secret>` with one of the `accepted` secrets (each compared in constant time). */
export async function presentsSecret(c: Context, accepted: readonly string[]): Promise<boolean> {
  const presented = bearerToken(c.req.header("authorization"));
  let matched = false;
  // Every accepted secret is compared, so the time taken does not say which one matched.
  if (presented !== null) for (const secret of accepted) matched = (secret !== "" && (await secretsEqual(presented, secret))) || matched;
  return matched;
}

/**
 * Renders a thrown error as the envelope. A ServiceError answers its own status (with `Retry-After: 1`
 * on 503 and 529, which clients honour) and logs its operator note; anything else is a 500 whose log
 * line names the route pattern and the error class only, since a message may quote customer input.
 * `answered` is told each error's code (the sidecar's svc_errors_total).
 */
export function errorRenderer(tier: string, answered?: (code: string) => void): ErrorHandler {
  return (err, c) => {
    answered?.(err instanceof ServiceError ? err.code : "internal_error");
    if (err instanceof ServiceError) {
      if (err.operatorNote) console.error(`${tier}: ${err.operatorNote}`);
      if (err.status === 503 || err.status === 529) c.header("retry-after", "1");
      return c.json(err.toBody(), err.status as ContentfulStatusCode);
    }
    console.error(`${tier}: ${c.req.method} ${c.req.routePath} failed: ${err.name}`);
    return c.json(errorBody("internal_error", "internal error"), 500);
  };
}

/** A JSON response written with contract/json.ts, so Maps keep their keys and order (`c.json` would drop them). */
export function orderedJson(c: Context, value: unknown, status: ContentfulStatusCode = 200): Response {
  return c.body(stringifyJson(value), status, { "content-type": "application/json" });
}

export const notFound: NotFoundHandler = (c) => c.json(errorBody("not_found", `no route for ${c.req.method} ${c.req.path}`), 404);

/**
 * The one 429 of every limit (per-second quotas, active batches, batch storage, active trainings):
 * the error envelope, `Retry-After` in whole seconds and `retry-after-ms`, which the third-party
 * clients honour; `headers` adds what a limit names of itself (x-ratelimit-limit-*).
 */
export function tooManyRequests(c: Context, code: ErrorCode, message: string, retryAfterMs: number, headers: Record<string, string> = {}): Response {
  c.header("retry-after", String(Math.ceil(retryAfterMs / 1000)));
  c.header("retry-after-ms", String(Math.round(retryAfterMs)));
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
  return c.json(errorBody(code, message), 429);
}
