/**
 * The quota gate of an API-key route (runs in workerd, after apiKeyAuth): admits the request against
 * the account's per-second quotas, reserving the `reservedTokens` an earlier step set (none by
 * default), or answers 429 with
 * `Retry-After` (seconds) and `retry-after-ms`, which the third-party clients honour.
 */
import { createMiddleware } from "hono/factory";
import { errorBody } from "../../contract/errors.ts";
import type { AppEnv } from "../env.ts";
import { admit } from "../../server-shared/quota.ts";
import { services } from "../services.ts";

export function quota() {
  return createMiddleware<AppEnv>(async (c, next) => {
    const account = c.get("account");
    const admission = await c.var.timings.time("quota", () => admit(services(c.env).redis, account, c.get("reservedTokens") ?? 0));
    if (!admission.admitted) {
      const unit = admission.limit === "requests_per_second" ? "requests" : "tokens";
      c.header("retry-after", String(Math.ceil(admission.retryAfterMs / 1000)));
      c.header("retry-after-ms", String(admission.retryAfterMs));
      c.header(`x-ratelimit-limit-${unit}`, String(admission.value));
      return c.json(errorBody("rate_limited", `account limit of ${admission.value} ${unit} per second reached`), 429);
    }
    await next();
  });
}
