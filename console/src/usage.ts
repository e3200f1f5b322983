/**
 * What the Usage page computes from GET /v1/usage (runs in the browser, and in tests): UTC day
 * arithmetic, the chart's scale and how many day labels fit, the words of its accessible summary,
 * and numbers and dollars as the page writes them.
 *
 *     countTicks(7)             // [0, 2, 4, 6, 8]
 *     labelEvery(30, 10)        // 5: every fifth day is labelled, today always
 *     dollars(1_234)            // "$0.001234"
 */
import type { UsageBucket, UsageCounts } from "../../contract/usage.ts";

const DAY_MS = 86_400_000;

/** `day` moved by `n` UTC days (YYYY-MM-DD). */
export const addDays = (day: string, n: number): string => new Date(Date.parse(`${day}T00:00:00Z`) + n * DAY_MS).toISOString().slice(0, 10);

/** A day as an axis label: "Nov 27". */
export const dayLabel = (day: string): string => new Date(`${day}T00:00:00Z`).toLocaleDateString("en-US", { month: "short", day: "numeric", timeZone: "UTC" });

/** A day as a sentence names it: "Thu, Nov 27". */
export const dayName = (day: string): string =>
  new Date(`${day}T00:00:00Z`).toLocaleDateString("en-US", { weekday: "short", month: "short", day: "numeric", timeZone: "UTC" });

/** A count with thousands separators, the same in every browser: "12,345". */
export const count = (n: number): string => n.toLocaleString("en-US");

/** A count and its noun, singular for one: "1 request", "3 requests". */
export const plural = (n: number, noun: string): string => `${count(n)} ${noun}${n === 1 ? "" : "s"}`;

/** Micro-USD as dollars: at least cents, every micro-dollar that is there ("$0.001234", "$12.50"). */
export const dollars = (micro: number): string =>
  (micro / 1e6).toLocaleString("en-US", { style: "currency", currency: "USD", minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** What a day's bar stacks: decisions answered in real time, and batch records. */
export const decisions = (counts: UsageCounts): number => counts.requests + counts.batch_records;

/** Whether anything was used at all (a range of zeros shows the empty state, not a flat chart). */
export const usedAnything = (totals: UsageCounts): boolean => Object.values(totals).some((n) => n > 0);

/**
 * The y axis of counts from 0 to at least `max`, in a few whole steps of 1, 2 or 5 times a power of
 * ten (a count has no halves).
 */
export function countTicks(max: number, most = 4): number[] {
  if (max <= 0) return [0, 1];
  const rough = max / most;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough)!);
  return Array.from({ length: Math.ceil(max / step) + 1 }, (_, i) => i * step);
}

/**
 * Every how many days a label is written under the bars, each `band` pixels wide, so that labels of
 * up to `labelWidth` pixels never overlap; the last day (today) is always one of them.
 */
export function labelEvery(days: number, band: number, labelWidth = 48): number {
  return [1, 2, 3, 5, 7, 10, 15].find((step) => step * band >= labelWidth) ?? days;
}

/** What one day's bar says, on hover or focus and in its tooltip. */
export function dayText(bucket: UsageBucket): string {
  const tokens = bucket.input_tokens || bucket.output_tokens ? `, ${count(bucket.input_tokens)} input and ${plural(bucket.output_tokens, "output token")}` : "";
  return `${dayName(bucket.day!)}: ${plural(bucket.requests, "request")}, ${plural(bucket.batch_records, "batch record")}${tokens}`;
}

/** The chart in one sentence, for those who do not see it (its aria-label); `days` oldest first. */
export function chartSummary(days: UsageBucket[]): string {
  const first = days[0]!;
  const last = days.at(-1)!;
  const requests = days.reduce((sum, d) => sum + d.requests, 0);
  const records = days.reduce((sum, d) => sum + d.batch_records, 0);
  const busiest = days.reduce((best, d) => (decisions(d) > decisions(best) ? d : best), first);
  return (
    `Requests and batch records per UTC day from ${first.day} to ${last.day}: ${plural(requests, "request")} and ${plural(records, "batch record")} in all, ` +
    `the most on ${busiest.day} (${count(decisions(busiest))}); ${last.day}: ${plural(last.requests, "request")}, ${plural(last.batch_records, "batch record")}.`
  );
}
