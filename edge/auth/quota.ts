/**
 * The quota gate of an API-key route (runs in workerd, after apiKeyAuth): admits the request against
 * the account's per-second quotas, reserving the `reservedTokens` an earlier step set (none by
 * default), or answers 429 with
 * `Retry-After` (seconds) and `retry-after-ms`, which the third-party clients honour.
 */
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../env.ts";
import { admit } from "../../server-shared/quota.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { services } from "../services.ts";

export function quota() {
  return createMiddleware<AppEnv>(async (c, next) => {
    const account = c.get("account");
    const admission = await c.var.timings.time("quota", () => admit(services(c.env).redis, account, c.get("reservedTokens") ?? 0));
    if (!admission.admitted) {
      const unit = admission.limit === "requests_per_second" ? "requests" : "tokens";
      return tooManyRequests(c, "rate_limited", `account limit of ${admission.value} ${unit} per second reached`, admission.retryAfterMs, {
        [`x-ratelimit-limit-${unit}`]: String(admission.value),
      });
    }
    await next();
  });
}
