/**
 * Successful input usage, recorded in Postgres after an answer is complete (runs in the sidecar).
 * Failed or unknown work is never recorded, so a missing row never reads as zero usage.
 */
import type { Pool, PoolClient } from "@neondatabase/serverless";
import type { Usage } from "../contract/decision.ts";

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
