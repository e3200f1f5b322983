/**
 * Bulk batches with an API key (runs in workerd); the wire shapes are contract/batches.ts.
 *
 *   POST /v1/batches {idempotency_key}   -> 201 Batch + upload (200 with the same batch on a repeat)
 *   POST /v1/batches/{id}/submit {}      -> Batch (queued); 409 until the input has been uploaded
 *   GET  /v1/batches/{id}                -> Batch
 *   POST /v1/batches/{id}/cancel {}      -> Batch (cancelled, or unchanged when already terminal)
 *   GET  /v1/batches?limit=&after=       -> BatchList, newest first
 *   GET  /v1/batches/{id}/results?after= -> ResultsPage (terminal batches; 410 after retention)
 *
 * A batch belongs to the account: any valid key of it may use every route, and another account's
 * batch answers the same 404 as an unknown id. The key is re-read on every request (apiKeyAuth).
 * Every statement is the batch store's (server-shared/jobs/batches.ts); this file turns its rows
 * into the wire shapes.
 */
import { Hono, type Context } from "hono";
import { BATCH_LIMITS, CreateBatchRequest, isTerminal, type Batch, type BatchList } from "../../contract/batches.ts";
import { tooManyRequests } from "../../server-shared/http.ts";
import { EmptyRequest, PARAMETERS } from "../../contract/routes.ts";
import { LIMITS } from "../../contract/limits.ts";
import { readJson } from "../../server-shared/body.ts";
import { httpDb } from "../../server-shared/db.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { signUpload } from "../../server-shared/grants.ts";
import { BatchStore, PROGRESS_WINDOW_MINUTES, type BatchRow, type QuotaState } from "../../server-shared/jobs/batches.ts";
import { apiKeyAuth } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { pathParam, queryParam } from "../params.ts";
import { services } from "../services.ts";
import { storageGrants } from "../storage.ts";

export const batches = new Hono<AppEnv>();
batches.use("/v1/batches", apiKeyAuth, quota());
batches.use("/v1/batches/*", apiKeyAuth, quota());

const storeOf = (c: Context<AppEnv>) => new BatchStore(httpDb(services(c.env).sql));

batches.post("/v1/batches", async (c) => {
  const { idempotency_key } = await readJson(c, CreateBatchRequest, { maxBytes: LIMITS.controlBodyBytes });
  const outcome = await storeOf(c).create({ id: crypto.randomUUID(), accountId: c.get("account").id, idempotencyKey: idempotency_key, keyId: c.get("keyId") });
  if (!outcome.batch) return quotaRefusal(c, outcome.quota);
  const { batch, created } = outcome;
  // A fresh destination while no input has arrived; none once it has (submit may follow directly).
  const needsUpload = batch.status === "uploading" && (created || (await c.env.BUCKET.head(batch.object_key)) === null);
  const body: Batch = { ...batchOf(batch), ...(needsUpload ? { upload: await signUpload(storageGrants(c), batch.object_key) } : {}) };
  return c.json(body, created ? 201 : 200);
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

batches.get("/v1/batches", async (c) => {
  const limit = queryParam(c, PARAMETERS.batchListLimit);
  const after = queryParam(c, PARAMETERS.batchListAfter);
  const { rows, hasMore } = await storeOf(c).list(c.get("account").id, { after, limit });
  const page = rows.map(batchOf);
  const body: BatchList = { object: "list", data: page, has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
  return c.json(body);
});

batches.get("/v1/batches/:id", async (c) => c.json(batchOf(await findBatch(c))));

batches.post("/v1/batches/:id/submit", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const batch = await findBatch(c);
  if (batch.status !== "uploading") {
    // A repeated submit changes nothing; a batch that ended before it was submitted cannot start.
    if (batch.submitted_at !== null) return c.json(batchOf(batch));
    throw new ServiceError("batch_not_submittable", `this batch is ${batch.status} and was never submitted; create a new one`);
  }
  if (Date.parse(batch.expires_at) <= Date.now()) {
    throw new ServiceError("batch_not_submittable", "this batch passed its deadline before it was submitted; create a new one");
  }
  const input = await c.env.BUCKET.head(batch.object_key);
  if (!input) throw new ServiceError("upload_incomplete", "the input file has not been uploaded yet: PUT it to the batch's upload URL first");
  const submitted = await storeOf(c).submit(batch.id, c.get("account").id, input.size);
  // Nothing updated: a concurrent submit or cancel went first; answer with what it left.
  return c.json(batchOf(submitted ?? (await findBatch(c))));
});

batches.post("/v1/batches/:id/cancel", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const batch = await findBatch(c);
  const cancelled = await storeOf(c).cancel(batch.id, c.get("account").id);
  return c.json(batchOf(cancelled ?? (await findBatch(c))));
});

batches.get("/v1/batches/:id/results", async (c) => {
  const after = queryParam(c, PARAMETERS.resultsAfter);
  const batch = await findBatch(c);
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

/** The account's batch named by the path, or the same 404 for an unknown id and another account's batch. */
async function findBatch(c: Context<AppEnv>): Promise<BatchRow> {
  const id = pathParam(c, PARAMETERS.batchId);
  const batch = id === null ? null : await storeOf(c).find(id, c.get("account").id);
  if (!batch) throw new ServiceError("not_found", "no batch with this id in this account");
  return batch;
}

function batchOf(row: BatchRow): Batch {
  return {
    id: row.id,
    object: "batch",
    status: row.status,
    idempotency_key: row.idempotency_key,
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
  const now = Date.now();
  const since = Math.max(now - PROGRESS_WINDOW_MINUTES * 60_000, Date.parse(row.started_at ?? row.created_at));
  const minutes = Math.max((now - since) / 60_000, 1 / 60);
  const perMinute = row.recent_results / minutes;
  const remaining = row.total_records - row.completed_records - row.failed_records;
  return {
    records_per_minute: Math.round(perMinute * 10) / 10,
    estimated_completion_at: perMinute > 0 ? new Date(now + (remaining / perMinute) * 60_000).toISOString() : null,
  };
}
