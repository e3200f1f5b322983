/**
 * Bulk batches with an API key (runs in workerd); the wire shapes are contract/batches.ts. A batch is
 * a kind of job: create, submit, get, cancel and list are the job routes (edge/jobs.ts), with a
 * batch's hooks; this file adds its results.
 *
 *   POST /v1/batches {idempotency_key}   -> 201 Batch + upload (200 with the same batch on a repeat)
 *   POST /v1/batches/{id}/submit {}      -> Batch (queued), its models frozen; 409 until the input has been uploaded
 *   GET  /v1/batches/{id}                -> Batch
 *   POST /v1/batches/{id}/cancel {}      -> Batch (cancelled, or unchanged when already terminal)
 *   GET  /v1/batches?limit=&after=       -> BatchList, newest first
 *   GET  /v1/batches/{id}/results?after= -> ResultsPage (terminal batches; 410 after retention)
 *
 * A batch belongs to the account: any valid key of it may use every route, and another account's
 * batch answers the same 404 as an unknown id. The key is re-read on every request (apiKeyAuth).
 */
import { Hono, type Context } from "hono";
import { BATCH_LIMITS, CreateBatchRequest, isTerminal, type Batch } from "../../contract/batches.ts";
import { LIMITS } from "../../contract/limits.ts";
import { PARAMETERS } from "../../contract/routes.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { batchFrozen, BatchStore, QuotaState, type BatchRow } from "../../server-shared/jobs/batches.ts";
import { apiKeyAuth, batchScope } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { jobRate, jobRoutes } from "../jobs.ts";
import { queryParam } from "../params.ts";

export const batches = new Hono<AppEnv>();

const { find: findBatch, storeOf } = jobRoutes(batches, {
  path: "/v1/batches",
  noun: "batch",
  auth: [apiKeyAuth, batchScope, quota()],
  store: (db) => new BatchStore(db),
  account: async (c) => c.get("account").id,
  create: { request: CreateBatchRequest, columns: (c) => ({ created_by_key: c.get("keyId") }) },
  refusal: (c, state) => quotaRefusal(c, QuotaState.parse(state)),
  frozen: async (c, _batch, accountId) => batchFrozen(accountId, c.get("keyId")),
  wire: batchOf,
  parameters: { id: PARAMETERS.batchId, limit: PARAMETERS.batchListLimit, after: PARAMETERS.batchListAfter, status: PARAMETERS.batchListStatus },
  notSubmittable: "batch_not_submittable",
});

/** 429 naming the quota a create would exceed. */
function quotaRefusal(c: Context<AppEnv>, quota: QuotaState) {
  const max = quota.max_active_batches;
  if (max !== null && quota.active >= max) {
    return tooManyRequests(c, "active_batch_limit", `this account may have at most ${max} active batches; wait for one to finish or cancel one`, LIMITS.jobLimitRetryMs);
  }
  return tooManyRequests(
    c,
    "batch_storage_limit",
    `this account's batch storage (${quota.max_batch_storage_bytes} bytes) is reserved by ${quota.kept} batches of ${LIMITS.batchStorageReservationBytes} bytes each; ` +
      `a batch's reservation ends when its data is deleted, ${LIMITS.bulkDataRetentionMs / 86_400_000} days after it finished`,
    LIMITS.jobLimitRetryMs,
  );
}

batches.get("/v1/batches/:id/results", async (c) => {
  const after = queryParam(c, PARAMETERS.resultsAfter);
  const { row: batch } = await findBatch(c);
  if (!isTerminal(batch.status)) {
    throw new ServiceError("batch_not_finished", `results are served once the batch has finished; it is ${batch.status}`);
  }
  if (batch.purged_at !== null || Date.parse(batch.finished_at!) + LIMITS.bulkDataRetentionMs <= Date.now()) {
    throw new ServiceError("results_expired", `results are kept for ${LIMITS.bulkDataRetentionMs / 86_400_000} days after a batch finishes; these have expired`);
  }
  const rows = await storeOf(c).results(batch.id, after, LIMITS.bulkResultsPage + 1);
  const page = rows.slice(0, LIMITS.bulkResultsPage);
  const next = rows.length > LIMITS.bulkResultsPage ? page.at(-1)!.line : null;
  // Each record is the exact JSON the worker committed (key order is meaning), so the page is joined as text.
  return c.body(`{"object":"list","data":[${page.map((row) => row.text).join(",")}],"next_cursor":${JSON.stringify(next)}}`, 200, {
    "content-type": "application/json",
  });
});

function batchOf(row: BatchRow): Batch {
  return {
    id: row.id,
    object: "batch",
    status: row.status,
    idempotency_key: row.idempotency_key,
    metadata: row.metadata,
    request_counts: { total: row.total_records, completed: row.completed_records, failed: row.failed_records },
    created_at: row.created_at,
    input_bytes: row.input_bytes,
    submitted_at: row.submitted_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
    expires_at: row.expires_at,
    results_expire_at: row.finished_at && new Date(Date.parse(row.finished_at) + LIMITS.bulkDataRetentionMs).toISOString(),
    error: row.error,
    progress: row.status === "running" ? progressOf(row) : null,
    limits: BATCH_LIMITS,
  };
}

/** Records per minute over the last minutes (since the start when that is more recent), and the time the rest would take at that rate. */
function progressOf(row: BatchRow): NonNullable<Batch["progress"]> {
  const rate = jobRate(row, row.recent_results, row.total_records - row.completed_records - row.failed_records);
  return { records_per_minute: rate.perMinute, estimated_completion_at: rate.doneAt };
}
