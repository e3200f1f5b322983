/**
 * An account's usage on the wire: what its decisions, batch records and image decisions used, per
 * UTC day and per API key, as recorded (usage rows are written once an answer is complete; failed
 * work is never recorded, and a runtime that reports no billable count is counted apart, never as
 * zero). The route takes the signed-in user's access token, as key management does.
 *
 *     GET /v1/usage?start=2026-11-01&end=2026-11-27&group_by=day   -> Usage, one bucket per day
 *     GET /v1/usage?group_by=key                                     -> Usage, one bucket per key (the last 30 days)
 *     GET /v1/usage?group_by=day,key                                 -> Usage, per day and key
 */
import { z } from "zod";
import { LIMITS } from "./limits.ts";

/** What a bucket may be per: a UTC day, an API key (a batch's records count for the key that submitted it). */
export const USAGE_GROUPS = ["day", "key"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

/** How far back usage can be asked for: usage rows are kept for the batch metadata's retention (30 days). */
export const USAGE_DAYS = LIMITS.batchMetadataRetentionMs / 86_400_000;

/** The days usage can be asked about: from the epoch to the last day whose next day is still a four-digit year. */
export const USAGE_DAY_RANGE = { first: "1970-01-01", last: "9999-12-30" } as const;

/** A UTC calendar day, `YYYY-MM-DD` (format `date` in the document: 2026-02-30 is not one), within USAGE_DAY_RANGE. */
export const UsageDay = z.iso
  .date({ error: "a day is YYYY-MM-DD, a calendar day" })
  .refine((day) => day >= USAGE_DAY_RANGE.first && day <= USAGE_DAY_RANGE.last, `a day is from ${USAGE_DAY_RANGE.first} to ${USAGE_DAY_RANGE.last}`);

/** How often one account may ask for its usage: at most `requests` in each fixed window of `windowMs` (429 `rate_limited` past it). */
export const USAGE_RATE = { requests: 20, windowMs: 10_000 } as const;

/** `group_by`: `day`, `key`, or both comma-separated (`day,key`); buckets come by day first either way. */
export const UsageGrouping = z
  .enum(["day", "key", "day,key", "key,day"], { error: `group_by is ${USAGE_GROUPS.join(", ")}, or both comma-separated` })
  .transform((text) => USAGE_GROUPS.filter((group) => text.split(",").includes(group)));

/** What one bucket counts. */
export const UsageCounts = z.object({
  /** Real-time decisions answered (POST /v1/systemone and image decisions). */
  requests: z.number().int(),
  /** Batch records answered. */
  batch_records: z.number().int(),
  /** The full processed context, as used for resource limits. */
  input_tokens: z.number().int(),
  /** The logical input billed, where the runtime reported it. */
  billable_input_tokens: z.number().int(),
  /** Answers whose runtime reported no billable count (absent is not zero: not in `billable_input_tokens`). */
  billable_unreported: z.number().int(),
  output_tokens: z.number().int(),
  /** Image credit charged for image decisions, in millionths of a US dollar. */
  image_credit_micro_usd: z.number().int(),
});
export type UsageCounts = z.infer<typeof UsageCounts>;

export const UsageBucket = UsageCounts.extend({
  /** The UTC day, when grouped by day; null otherwise. */
  day: z.string().nullable(),
  /** The API key, when grouped by key; null otherwise, and for a signed-in session's image decisions. */
  key_id: z.string().nullable(),
  /** That key's name (a revoked key's too). */
  key_name: z.string().nullable(),
});
export type UsageBucket = z.infer<typeof UsageBucket>;

export const Usage = z.object({
  object: z.literal("usage"),
  /** The first and last UTC day counted (inclusive). */
  start: z.string(),
  end: z.string(),
  group_by: z.array(z.enum(USAGE_GROUPS)),
  /** Oldest day first, then by key name; grouped by day alone, every day of the range (zeros included). */
  data: z.array(UsageBucket),
  totals: UsageCounts,
});
export type Usage = z.infer<typeof Usage>;
