/**
 * Successful input usage, recorded in Postgres after an answer is complete (runs in the sidecar).
 * Failed or unknown work is never recorded, so a missing row never reads as zero usage.
 */
import type { Pool, PoolClient } from "@neondatabase/serverless";
import type { Usage } from "../contract/decision.ts";
import { loggable } from "../server-shared/errors.ts";

export interface UsageRecord {
  accountId: string;
  keyId: string | null;
  releaseId: string;
  source: "realtime" | "bulk";
  requestId: string | null;
  usage: Usage;
}

export async function recordUsage(db: Pool | PoolClient, record: UsageRecord): Promise<void> {
  await db.query(
    `INSERT INTO usage_records (account_id, key_id, release_id, source, request_id, input_tokens, output_tokens, billable_input_tokens)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      record.accountId,
      record.keyId,
      record.releaseId,
      record.source,
      record.requestId,
      record.usage.input_tokens,
      record.usage.output_tokens,
      record.usage.billable_input_tokens ?? null,
    ],
  );
}

/** Deletes usage rows older than `ageMs` (retention cleanup). */
export async function deleteUsageBefore(db: Pool, ageMs: number): Promise<void> {
  await db.query("DELETE FROM usage_records WHERE created_at <= now() - make_interval(secs => $1::double precision / 1000)", [ageMs]);
}

/**
 * Usage rows written after the answer has gone out, so that the customer never waits on Postgres
 * (runs in the sidecar). A write that fails is tried again (three attempts in all, 100 ms then
 * 200 ms apart); one that still fails is reported to the operator by request id, never by content.
 * `flush` resolves once every row handed over so far is written or has failed for good: a clean
 * shutdown stops taking requests, flushes, and only then closes the pool, so no usage of an
 * answered request is lost to a restart.
 *
 *     usage.record({ accountId, keyId, releaseId, source: "realtime", requestId, usage });
 *     await usage.flush(); // on SIGTERM, after the server has stopped
 */
export class UsageWriter {
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly db: Pool,
    private readonly log: (line: string) => void = (line) => console.error(line),
  ) {}

  record(record: UsageRecord): void {
    const write = this.write(record).finally(() => this.pending.delete(write));
    this.pending.add(write);
  }

  /** Rows handed over and not yet settled. */
  get backlog(): number {
    return this.pending.size;
  }

  async flush(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  private async write(record: UsageRecord): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await recordUsage(this.db, record);
        return;
      } catch (err) {
        if (attempt === 3) {
          this.log(`sidecar: usage of request ${record.requestId ?? "(none)"} not recorded after 3 attempts: ${loggable(err)}`);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }
}
