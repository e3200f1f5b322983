/**
 * `client.usage`: what the account used (GET /v1/usage), per UTC day and per API key: real-time
 * decisions (`requests`), batch records, tokens and image credit, as the service recorded them. Like
 * key management, it takes the signed-in user's access token (the client's `accessToken`), never the
 * API key.
 *
 *     const usage = await client.usage.retrieve({ groupBy: ["key"] });   // the last 30 days, per key
 *     for (const bucket of usage.data) console.log(bucket.key_name, bucket.requests, bucket.input_tokens);
 *     usage.totals.batch_records;
 *
 * The range is at most USAGE_DAYS (30) days, as far back as usage is kept; a day is `YYYY-MM-DD` in
 * UTC. The service checks the range and the grouping (an UnprocessableEntityError, 422
 * `invalid_request`, names what is wrong); the client sends them as given.
 */
import type { Usage as UsageReport, UsageGroup } from "../../../../contract/usage.ts";
import { withRequestId, type RequestOptions, type Transport, type WithRequestId } from "../core.ts";

export interface RetrieveUsageParams {
  /** The first UTC day counted, `YYYY-MM-DD` (default: 29 days before `end`). */
  start?: string;
  /** The last UTC day counted, `YYYY-MM-DD` (default: today, UTC). */
  end?: string;
  /** Buckets per `day` (the default), per `key`, or both (`["day", "key"]`). */
  groupBy?: readonly UsageGroup[] | UsageGroup;
}

export class UsageReports {
  constructor(private readonly transport: Transport) {}

  /**
   * The account's usage over `start`..`end` (inclusive), in buckets of `groupBy`, oldest day first
   * and then by key name, with the totals. By day alone, every day of the range is listed (zeros
   * included). A bucket per key names the key (`key_id`, `key_name`, a revoked key's too); a
   * signed-in session's image decisions have no key (`key_id` null).
   *
   *     const { data, totals } = await client.usage.retrieve({ start: "2026-11-01", end: "2026-11-27" });
   *     const perKeyToday = await client.usage.retrieve({ start: today, end: today, groupBy: ["day", "key"] });
   */
  async retrieve(params: RetrieveUsageParams = {}, options?: RequestOptions): Promise<WithRequestId<UsageReport>> {
    const { start, end, groupBy } = params;
    const query = { start, end, group_by: typeof groupBy === "string" ? groupBy : groupBy?.join(",") };
    return withRequestId(await this.transport.request<UsageReport>({ method: "GET", path: "/v1/usage", auth: "access_token", query }, options));
  }
}
