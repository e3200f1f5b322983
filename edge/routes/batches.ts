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
 * Creation admits the account's batch quotas in one Postgres transaction that first locks the
 * account's row, so concurrent creates (any key, any edge) are serialized and cannot both take the
 * last slot, and one idempotency key makes one batch.
 */
import { Hono, type Context } from "hono";
import { BATCH_LIMITS, BATCH_LIST_PAGE, CreateBatchRequest, isTerminal, TERMINAL_STATUSES, type Batch, type BatchList, type BatchStatus } from "../../contract/batches.ts";
import { errorBody } from "../../contract/errors.ts";
import { EmptyRequest } from "../../contract/routes.ts";
import { LIMITS } from "../../contract/limits.ts";
import { readJson } from "../../server-shared/body.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { apiKeyAuth } from "../auth/api-key.ts";
import { quota } from "../auth/quota.ts";
import type { AppEnv } from "../env.ts";
import { iso } from "../rows.ts";
import { services } from "../services.ts";
import { signUpload } from "../../server-shared/grants.ts";
import { storageGrants } from "../storage.ts";

export const batches = new Hono<AppEnv>();
batches.use("/v1/batches", apiKeyAuth, quota());
batches.use("/v1/batches/*", apiKeyAuth, quota());

/** The window over which a running batch's rate is measured. */
const PROGRESS_WINDOW_MINUTES = 5;
const COLUMNS =
  "id, status, idempotency_key, object_key, total_records, completed_records, failed_records, input_bytes, error, " +
  "created_at, submitted_at, started_at, finished_at, expires_at, purged_at, " +
  `(SELECT count(*) FROM batch_results r WHERE r.batch_id = batches.id AND r.committed_at > now() - interval '${PROGRESS_WINDOW_MINUTES} minutes') AS recent_results`;
const TERMINAL_SQL = `(${TERMINAL_STATUSES.map((s) => `'${s}'`).join(", ")})`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** How long after a refused create to try again: slots free up as batches finish or are purged. */
const QUOTA_RETRY_SECONDS = 60;

const objectKeyOf = (id: string) => `batches/${id}/input.jsonl`;

batches.post("/v1/batches", async (c) => {
  const { idempotency_key: key } = await readJson(c, CreateBatchRequest, { maxBytes: LIMITS.controlBodyBytes });
  const account = c.get("account").id;
  const id = crypto.randomUUID();
  const { sql } = services(c.env);
  // Read committed: each statement sees what committed before it ran. The first waits for the
  // account's row lock, so every count below already includes a concurrent create that went first.
  const [, inserted = [], state = []] = await sql.transaction([
    sql`SELECT id FROM accounts WHERE id = ${account} FOR UPDATE`,
    sql`INSERT INTO batches (id, account_id, idempotency_key, created_by_key, object_key, expires_at)
        SELECT ${id}, ${account}, ${key}, ${c.get("keyId")}, ${objectKeyOf(id)}, now() + make_interval(secs => ${LIMITS.batchLifetimeMs / 1000})
          FROM accounts a
         WHERE a.id = ${account}
           AND NOT EXISTS (SELECT 1 FROM batches WHERE account_id = ${account} AND idempotency_key = ${key})
           AND (a.max_active_batches IS NULL OR a.max_active_batches >
                (SELECT count(*) FROM batches WHERE account_id = ${account} AND status NOT IN ${sql.unsafe(TERMINAL_SQL)}))
           AND (a.max_batch_storage_bytes IS NULL OR a.max_batch_storage_bytes >=
                ${LIMITS.batchStorageReservationBytes}::bigint * (1 + (SELECT count(*) FROM batches WHERE account_id = ${account} AND purged_at IS NULL)))
        ON CONFLICT (account_id, idempotency_key) DO NOTHING
        RETURNING id`,
    sql`SELECT a.max_active_batches, a.max_batch_storage_bytes,
               (SELECT count(*) FROM batches WHERE account_id = a.id AND status NOT IN ${sql.unsafe(TERMINAL_SQL)}) AS active,
               (SELECT count(*) FROM batches WHERE account_id = a.id AND purged_at IS NULL) AS kept,
               (SELECT row_to_json(b) FROM (SELECT ${sql.unsafe(COLUMNS)} FROM batches WHERE account_id = a.id AND idempotency_key = ${key}) b) AS batch
          FROM accounts a WHERE a.id = ${account}`,
  ]);
  const row = state[0];
  if (!row?.batch) return quotaRefusal(c, row);
  const batch = row.batch as Record<string, unknown>;
  const created = inserted.length > 0;
  // A fresh destination while no input has arrived; none once it has (submit may follow directly).
  const needsUpload = batch.status === "uploading" && (created || (await c.env.BUCKET.head(String(batch.object_key))) === null);
  const body: Batch = { ...batchOf(batch), ...(needsUpload ? { upload: await signUpload(storageGrants(c), String(batch.object_key)) } : {}) };
  return c.json(body, created ? 201 : 200);
});

/** 429 naming the quota a create would exceed. */
function quotaRefusal(c: Context<AppEnv>, row: Record<string, unknown> | undefined) {
  c.header("retry-after", String(QUOTA_RETRY_SECONDS));
  c.header("retry-after-ms", String(QUOTA_RETRY_SECONDS * 1000));
  const max = row?.max_active_batches;
  if (max !== null && max !== undefined && Number(row?.active) >= Number(max)) {
    return c.json(errorBody("active_batch_limit", `this account may have at most ${max} active batches; wait for one to finish or cancel one`), 429);
  }
  const storage = Number(row?.max_batch_storage_bytes);
  return c.json(
    errorBody(
      "batch_storage_limit",
      `this account's batch storage (${storage} bytes) is reserved by ${row?.kept} batches of ${LIMITS.batchStorageReservationBytes} bytes each; ` +
        `a batch's reservation ends when its data is deleted, ${LIMITS.bulkDataRetentionMs / 86_400_000} days after it finished`,
    ),
    429,
  );
}

batches.get("/v1/batches", async (c) => {
  const limitText = c.req.query("limit");
  const limit = limitText === undefined ? BATCH_LIST_PAGE.default : Number(limitText);
  if (!/^\d{1,3}$/.test(limitText ?? "20") || limit < 1 || limit > BATCH_LIST_PAGE.max) {
    throw new ServiceError("invalid_request", `limit must be an integer from 1 to ${BATCH_LIST_PAGE.max}`);
  }
  const after = c.req.query("after");
  if (after !== undefined && !UUID.test(after)) throw new ServiceError("invalid_request", "after must be a batch id from an earlier page's next_cursor");
  const account = c.get("account").id;
  const rows = await services(c.env).sql.query(
    `SELECT ${COLUMNS} FROM batches
      WHERE account_id = $1
        AND ($2::uuid IS NULL OR (created_at, id) < (SELECT created_at, id FROM batches WHERE id = $2::uuid AND account_id = $1))
      ORDER BY created_at DESC, id DESC
      LIMIT $3`,
    [account, after ?? null, limit + 1],
  );
  const page = rows.slice(0, limit).map(batchOf);
  const body: BatchList = { object: "list", data: page, has_more: rows.length > limit, next_cursor: rows.length > limit ? page.at(-1)!.id : null };
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
  if (Date.parse(String(batch.expires_at)) <= Date.now()) {
    throw new ServiceError("batch_not_submittable", "this batch passed its deadline before it was submitted; create a new one");
  }
  const input = await c.env.BUCKET.head(String(batch.object_key));
  if (!input) throw new ServiceError("upload_incomplete", "the input file has not been uploaded yet: PUT it to the batch's upload URL first");
  const account = c.get("account").id;
  // The aliases and releases the account may use now are the ones this job uses, whatever moves later.
  const rows = await services(c.env).sql.query(
    `UPDATE batches SET status = 'queued', submitted_at = now(), input_bytes = $3,
            models = jsonb_build_object(
              'releases', (SELECT coalesce(jsonb_object_agg(r.id, r.fingerprint), '{}') FROM model_releases r
                            WHERE r.retired_at IS NULL AND (r.owners IS NULL OR $2::uuid = ANY (r.owners))),
              'aliases', (SELECT coalesce(jsonb_object_agg(m.alias, m.release_id), '{}') FROM model_aliases m JOIN model_releases r ON r.id = m.release_id
                           WHERE r.retired_at IS NULL AND (r.owners IS NULL OR $2::uuid = ANY (r.owners))))
      WHERE id = $1 AND account_id = $2 AND status = 'uploading'
      RETURNING ${COLUMNS}`,
    [batch.id, account, input.size],
  );
  // Nothing updated: a concurrent submit or cancel went first; answer with what it left.
  return c.json(batchOf(rows[0] ?? (await findBatch(c))));
});

batches.post("/v1/batches/:id/cancel", async (c) => {
  await readJson(c, EmptyRequest, { maxBytes: LIMITS.actionBodyBytes, emptyIsObject: true });
  const batch = await findBatch(c);
  const rows = await services(c.env).sql.query(
    `UPDATE batches SET status = 'cancelled', finished_at = now()
      WHERE id = $1 AND account_id = $2 AND status NOT IN ${TERMINAL_SQL}
      RETURNING ${COLUMNS}`,
    [batch.id, c.get("account").id],
  );
  return c.json(batchOf(rows[0] ?? (await findBatch(c))));
});

batches.get("/v1/batches/:id/results", async (c) => {
  const afterText = c.req.query("after") ?? "0";
  if (!/^\d{1,9}$/.test(afterText) || Number(afterText) > LIMITS.bulkFileRecords) {
    throw new ServiceError("invalid_request", `after must be an integer from 0 to ${LIMITS.bulkFileRecords}: 0, or an earlier page's next_cursor`);
  }
  const batch = await findBatch(c);
  if (!isTerminal(batch.status as BatchStatus)) {
    throw new ServiceError("batch_not_finished", `results are served once the batch has finished; it is ${batch.status}`);
  }
  if (batch.purged_at !== null || Date.parse(String(batch.finished_at)) + LIMITS.bulkDataRetentionMs <= Date.now()) {
    throw new ServiceError("results_expired", `results are kept for ${LIMITS.bulkDataRetentionMs / 86_400_000} days after a batch finishes; these have expired`);
  }
  const rows = await services(c.env).sql.query(
    "SELECT line, result::text AS result FROM batch_results WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3",
    [batch.id, Number(afterText), LIMITS.bulkResultsPage + 1],
  );
  const page = rows.slice(0, LIMITS.bulkResultsPage);
  const next = rows.length > LIMITS.bulkResultsPage ? Number(page.at(-1)!.line) : null;
  // Each record is the exact JSON the worker committed (key order is meaning), so the page is joined as text.
  return c.body(`{"object":"list","data":[${page.map((row) => String(row.result)).join(",")}],"next_cursor":${JSON.stringify(next)}}`, 200, {
    "content-type": "application/json",
  });
});

/** The account's batch named by the path, or the same 404 for an unknown id and another account's batch. */
async function findBatch(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  const id = c.req.param("id") ?? "";
  const rows = UUID.test(id)
    ? await services(c.env).sql.query(`SELECT ${COLUMNS} FROM batches WHERE id = $1 AND account_id = $2`, [id, c.get("account").id])
    : [];
  if (!rows[0]) throw new ServiceError("not_found", "no batch with this id in this account");
  return rows[0];
}

function batchOf(row: Record<string, unknown>): Batch {
  const finished = iso(row.finished_at);
  return {
    id: String(row.id),
    object: "batch",
    status: row.status as BatchStatus,
    idempotency_key: String(row.idempotency_key),
    request_counts: { total: Number(row.total_records), completed: Number(row.completed_records), failed: Number(row.failed_records) },
    created_at: iso(row.created_at)!,
    input_bytes: row.input_bytes === null ? null : Number(row.input_bytes),
    submitted_at: iso(row.submitted_at),
    started_at: iso(row.started_at),
    finished_at: finished,
    expires_at: iso(row.expires_at)!,
    results_expire_at: finished && new Date(Date.parse(finished) + LIMITS.bulkDataRetentionMs).toISOString(),
    error: (row.error as Batch["error"]) ?? null,
    progress: row.status === "running" ? progressOf(row) : null,
    limits: BATCH_LIMITS,
  };
}

/** Records per minute over the last minutes (since the start when that is more recent), and the time the rest would take at that rate. */
function progressOf(row: Record<string, unknown>): NonNullable<Batch["progress"]> {
  const now = Date.now();
  const since = Math.max(now - PROGRESS_WINDOW_MINUTES * 60_000, Date.parse(iso(row.started_at) ?? iso(row.created_at)!));
  const minutes = Math.max((now - since) / 60_000, 1 / 60);
  const perMinute = Number(row.recent_results) / minutes;
  const remaining = Number(row.total_records) - Number(row.completed_records) - Number(row.failed_records);
  return {
    records_per_minute: Math.round(perMinute * 10) / 10,
    estimated_completion_at: perMinute > 0 ? new Date(now + (remaining / perMinute) * 60_000).toISOString() : null,
  };
}
