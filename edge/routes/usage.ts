/**
 * An account's usage with a user access token (runs in workerd); the wire shapes are contract/usage.ts.
 *
 *   GET /v1/usage?start=YYYY-MM-DD&end=YYYY-MM-DD&group_by=day|key|day,key  -> Usage
 *
 * Counted from what the service recorded: usage rows (a real-time or image decision's, with its key;
 * a batch record's, with the key that submitted the batch) and settled image credit (the decision's
 * key, through its request id). Days are UTC, from USAGE_DAY_RANGE. A user without an account yet has
 * used nothing. An account reads its usage at most USAGE_RATE.requests times a window (429 past it).
 */
import { Hono } from "hono";
import { z } from "zod";
import { PARAMETERS } from "../../contract/routes.ts";
import { USAGE_DAYS, USAGE_RATE, type Usage, type UsageBucket, type UsageCounts, type UsageGroup } from "../../contract/usage.ts";
import { Column } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { admitRate } from "../../server-shared/quota.ts";
import { USAGE_ENTRIES } from "../../server-shared/usage.ts";
import { userAccount } from "../accounts.ts";
import { userAuth } from "../auth/user.ts";
import type { AppEnv } from "../env.ts";
import { queryParam } from "../params.ts";
import { services } from "../services.ts";

export const usage = new Hono<AppEnv>();
usage.use("/v1/usage", userAuth);

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const Row = z.object({
  day: z.string().nullable(),
  key_id: z.string().nullable(),
  key_name: z.string().nullable(),
  requests: Column.int,
  batch_records: Column.int,
  input_tokens: Column.int,
  billable_input_tokens: Column.int,
  billable_unreported: Column.int,
  output_tokens: Column.int,
  image_credit_micro_usd: Column.int,
});

const COUNTS = ["requests", "batch_records", "input_tokens", "billable_input_tokens", "billable_unreported", "output_tokens", "image_credit_micro_usd"] as const;
const zero = (): UsageCounts => Object.fromEntries(COUNTS.map((name) => [name, 0])) as UsageCounts;

usage.get("/v1/usage", async (c) => {
  const accountId = await userAccount(c, { create: false });
  if (accountId) {
    const admission = await admitRate(services(c.env).redis, `usage:${accountId}`, USAGE_RATE.requests, USAGE_RATE.windowMs);
    if (!admission.admitted) {
      return tooManyRequests(c, "rate_limited", `an account may read its usage at most ${USAGE_RATE.requests} times in ${USAGE_RATE.windowMs / 1000} seconds`, admission.retryAfterMs);
    }
  }
  const groups = queryParam(c, PARAMETERS.usageGroupBy);
  const end = queryParam(c, PARAMETERS.usageEnd) ?? dayOf(Date.now());
  const start = queryParam(c, PARAMETERS.usageStart) ?? dayOf(Date.parse(end) - (USAGE_DAYS - 1) * DAY_MS);
  const days = (Date.parse(end) - Date.parse(start)) / DAY_MS + 1;
  if (days < 1) throw new ServiceError("invalid_request", `start (${start}) is after end (${end})`);
  if (days > USAGE_DAYS) throw new ServiceError("invalid_request", `at most ${USAGE_DAYS} days at a time (usage is kept ${USAGE_DAYS} days); this range has ${days}`);

  const byDay = groups.includes("day");
  const byKey = groups.includes("key");
  const rows = accountId
    ? (
        await services(c.env).sql.query(
          `SELECT ${byDay ? "to_char(e.day, 'YYYY-MM-DD')" : "NULL"} AS day, ${byKey ? "e.key_id" : "NULL"} AS key_id, ${byKey ? "min(k.name)" : "NULL"} AS key_name,
                  ${COUNTS.map((name) => `sum(e.${name}) AS ${name}`).join(", ")}
             FROM (${USAGE_ENTRIES}) e LEFT JOIN api_keys k ON k.id = e.key_id AND k.account_id = $1
            GROUP BY 1, 2 ORDER BY 1, 3, 2`,
          [accountId, `${start}T00:00:00Z`, new Date(Date.parse(end) + DAY_MS).toISOString()],
        )
      ).map((row) => Row.parse(row))
    : [];

  const totals = zero();
  for (const row of rows) for (const name of COUNTS) totals[name] += row[name];
  const body: Usage = { object: "usage", start, end, group_by: [...groups] as UsageGroup[], data: buckets(rows, { start, days, byDay, byKey }), totals };
  return c.json(body);
});

/** The rows as buckets; grouped by day alone, every day of the range (a day without usage is zeros), so that a chart has no gaps. */
function buckets(rows: UsageBucket[], range: { start: string; days: number; byDay: boolean; byKey: boolean }): UsageBucket[] {
  if (!range.byDay || range.byKey) return rows;
  const found = new Map(rows.map((row) => [row.day, row]));
  return Array.from({ length: range.days }, (_, i) => {
    const day = dayOf(Date.parse(range.start) + i * DAY_MS);
    return found.get(day) ?? { day, key_id: null, key_name: null, ...zero() };
  });
}
