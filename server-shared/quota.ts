/**
 * Account quotas: requests per second and tokens per second, admitted together by one atomic Redis
 * script in fixed UTC-second windows (the edge for real-time requests, the sidecar's bulk worker for
 * each record; both through @upstash/redis).
 *
 * - An admission reserves its worst-case token work; nothing is refunded afterwards.
 * - A rejected request consumes nothing, so a client that backs off for `Retry-After` gets in.
 * - A `tokens_per_second` below one request's reservation rejects that request every time.
 * - Redis unreachable: an account without quotas is unaffected (Redis is not consulted); an account
 *   with a quota is refused with 503 `quota_unavailable` and `Retry-After`, never let through
 *   unmetered.
 */
import type { Redis } from "@upstash/redis";
import { ServiceError } from "./errors.ts";
import type { AccountSettings } from "./accounts.ts";

/**
 * KEYS[1]: request count of this second, KEYS[2]: tokens reserved in this second.
 * ARGV: request limit (0 = none), token limit (0 = none), tokens to reserve.
 * Returns {1, 0} when admitted, {0, 1} over the request limit, {0, 2} over the token limit.
 */
export const ADMIT_SCRIPT = `
local requests = tonumber(redis.call('GET', KEYS[1]) or '0')
local tokens = tonumber(redis.call('GET', KEYS[2]) or '0')
local request_limit, token_limit, reserve = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if request_limit > 0 and requests + 1 > request_limit then return {0, 1} end
if token_limit > 0 and tokens + reserve > token_limit then return {0, 2} end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], 2000)
redis.call('INCRBY', KEYS[2], reserve)
redis.call('PEXPIRE', KEYS[2], 2000)
return {1, 0}
`;

export type Admission =
  | { admitted: true }
  | { admitted: false; limit: "requests_per_second" | "tokens_per_second"; value: number; retryAfterMs: number };

type QuotaAccount = { id: string } & Pick<AccountSettings, "requests_per_second" | "tokens_per_second">;

export async function admit(redis: Redis, account: QuotaAccount, reserveTokens: number, nowMs = Date.now()): Promise<Admission> {
  const requestLimit = account.requests_per_second ?? 0;
  const tokenLimit = account.tokens_per_second ?? 0;
  if (requestLimit === 0 && tokenLimit === 0) return { admitted: true };

  const second = Math.floor(nowMs / 1000);
  // The hash tag keeps both counters of an account in one cluster slot, as a script requires.
  const keys = [`quota:{${account.id}}:${second}:requests`, `quota:{${account.id}}:${second}:tokens`];
  let result: [number, number];
  try {
    result = await redis.createScript<[number, number]>(ADMIT_SCRIPT).exec(keys, [String(requestLimit), String(tokenLimit), String(reserveTokens)]);
  } catch {
    throw new ServiceError("quota_unavailable", "quota service unavailable; retry shortly");
  }
  if (result[0] === 1) return { admitted: true };
  const retryAfterMs = 1000 - (nowMs % 1000);
  return result[1] === 1
    ? { admitted: false, limit: "requests_per_second", value: requestLimit, retryAfterMs }
    : { admitted: false, limit: "tokens_per_second", value: tokenLimit, retryAfterMs };
}

/**
 * A fixed-window rate of `limit` requests per `windowMs` under `name` (e.g. one account's usage
 * reads): admitted and counted, or refused with the time to the window's end. Redis unreachable:
 * admitted, since such a rate guards cost, not an account's paid quota.
 */
export async function admitRate(redis: Redis, name: string, limit: number, windowMs: number, nowMs = Date.now()): Promise<{ admitted: true } | { admitted: false; retryAfterMs: number }> {
  const window = Math.floor(nowMs / windowMs);
  let count: number;
  try {
    count = await redis.createScript<number>(RATE_SCRIPT).exec([`rate:{${name}}:${window}`], [String(windowMs * 2)]);
  } catch {
    return { admitted: true };
  }
  return count <= limit ? { admitted: true } : { admitted: false, retryAfterMs: windowMs - (nowMs % windowMs) };
}

/** KEYS[1]: the window's count; ARGV[1]: its time to live (ms). Returns the count with this request. */
const RATE_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count
`;
