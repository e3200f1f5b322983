/**
 * Bulk batches on the wire: the batch resource and its states, the input (JSONL) record, the result
 * record and the results page. Edge, sidecar, tests, SDKs and the CLI import these; every bound comes
 * from LIMITS. Field names follow what users of OpenAI's batch API know (`request_counts`,
 * `created_at`, `expires_at`, a `list` object with `data`).
 *
 *     POST /v1/batches {"idempotency_key": "2026-11-22-tickets"}
 *       -> 201 Batch, with `upload: {url, method: "PUT", headers, expires_at}`
 *     curl -T input.jsonl -H "if-none-match: *" "$url"
 *
 * `input_bytes` at create is optional (the specification's body is `{idempotency_key}` alone): with
 * it, the upload is bound to exactly that size by a signed Content-Length, which R2 itself checks;
 * without it, the upload goes through the edge's own storage route, which stops any body past
 * LIMITS.bulkFileBytes.
 *     POST /v1/batches/{id}/submit {}                    -> Batch (queued)
 *     GET  /v1/batches/{id}                              -> Batch
 *     POST /v1/batches/{id}/cancel {}                    -> Batch
 *     GET  /v1/batches?limit=20&after=<batch id>         -> BatchList, newest first
 *     GET  /v1/batches/{id}/results?after=<line>         -> ResultsPage
 *
 * An input line is `{"custom_id": "t-1", "body": <a decision request>}`; a result record is exactly
 * one of `{"custom_id", "response": <a decision response>}` and `{"custom_id", "error": {status, code,
 * message}}`. Results come in input order, 20 per page; a page's `next_cursor` is the input line
 * number (1-based) of its last record, to be passed as `after`, and null on the last page.
 */
import { z } from "zod";
import { DecisionRequest, DecisionResponse } from "./decision.ts";
import { fields, JsonValue, looseFields } from "./fields.ts";
import { IdempotencyKey, inputBytes, JobError, JobMetadata, noNul } from "./jobs.ts";
import { LIMITS } from "./limits.ts";

export const BATCH_STATUSES = ["uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired"] as const;
export const BatchStatus = z.enum(BATCH_STATUSES);
export type BatchStatus = z.infer<typeof BatchStatus>;

/** States a batch never leaves. */
export const TERMINAL_STATUSES: readonly BatchStatus[] = ["completed", "failed", "cancelled", "expired"];
export const isTerminal = (status: BatchStatus) => TERMINAL_STATUSES.includes(status);

export { IDEMPOTENCY_KEY_MAX } from "./jobs.ts";
/** `custom_id` of an input record: 1-255 characters, no U+0000. */
export const CUSTOM_ID_MAX = 255;
/** Batches per page of GET /v1/batches: the default, and the most `limit` may ask for. */
export const BATCH_LIST_PAGE = { default: 20, max: 100 } as const;

export const CreateBatchRequest = fields({
  idempotency_key: IdempotencyKey,
  /** The input file's size, optional: when given, its upload is bound to exactly this many bytes. */
  input_bytes: inputBytes(LIMITS.bulkFileBytes, "batch input file").optional(),
  metadata: JobMetadata.optional(),
});
export type CreateBatchRequest = z.infer<typeof CreateBatchRequest>;

/** What every batch may hold, as published on the batch itself. */
export const BatchLimits = z.object({
  file_bytes: z.number().int(),
  records: z.number().int(),
  results_page: z.number().int(),
  lifetime_seconds: z.number().int(),
  upload_validity_seconds: z.number().int(),
  results_retention_seconds: z.number().int(),
});
export type BatchLimits = z.infer<typeof BatchLimits>;

export const BATCH_LIMITS: BatchLimits = {
  file_bytes: LIMITS.bulkFileBytes,
  records: LIMITS.bulkFileRecords,
  results_page: LIMITS.bulkResultsPage,
  lifetime_seconds: LIMITS.batchLifetimeMs / 1000,
  upload_validity_seconds: LIMITS.signedUploadValidityMs / 1000,
  results_retention_seconds: LIMITS.bulkDataRetentionMs / 1000,
};

/** Where and how to upload the input file: a signed PUT, used with exactly these headers (with a `content-length` when `input_bytes` was declared). */
export const Upload = z.object({
  url: z.string(),
  method: z.literal("PUT"),
  headers: z.record(z.string(), z.string()),
  expires_at: z.string(),
});
export type Upload = z.infer<typeof Upload>;

/** A batch-level failure (file validation); per-record errors are in the results. */

const Timestamp = z.string();

export const Batch = z.object({
  id: z.string().uuid(),
  object: z.literal("batch"),
  status: BatchStatus,
  idempotency_key: z.string(),
  /** The caller's pairs given at create; null when none were. */
  metadata: z.record(z.string(), z.string()).nullable(),
  request_counts: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }),
  created_at: Timestamp,
  /** The input file's size: as declared at create, or as uploaded once submitted (null: not declared, not yet submitted). */
  input_bytes: z.number().int().nullable(),
  submitted_at: Timestamp.nullable(),
  /** When a worker claimed the batch and began validating its file. */
  started_at: Timestamp.nullable(),
  /** When it became terminal (completed, failed, cancelled or expired). */
  finished_at: Timestamp.nullable(),
  /** The job deadline: a batch not terminal by then expires (committed results stay). */
  expires_at: Timestamp,
  /** Results answer 410 from then on; null until terminal. */
  results_expire_at: Timestamp.nullable(),
  error: JobError.nullable(),
  /** While running: records committed per minute over the last minutes, and when the rest may be done. */
  progress: z.object({ records_per_minute: z.number(), estimated_completion_at: Timestamp.nullable() }).nullable(),
  limits: BatchLimits,
  /** Present on create while no input has arrived: a fresh signed destination each time. */
  upload: Upload.optional(),
});
export type Batch = z.infer<typeof Batch>;

export const BatchList = z.object({
  object: z.literal("list"),
  data: z.array(Batch),
  has_more: z.boolean(),
  /** Pass as `after` for the next (older) page; null on the last page. */
  next_cursor: z.string().nullable(),
});
export type BatchList = z.infer<typeof BatchList>;

const CustomId = z
    .string({ error: "custom_id must be a string" })
    .min(1, "custom_id must not be empty")
    .max(CUSTOM_ID_MAX, `custom_id must be at most ${CUSTOM_ID_MAX} characters`)
    .refine(noNul, "custom_id must not contain U+0000");

/** One line of the input file, as a client writes it. */
export const InputRecord = looseFields({ custom_id: CustomId, body: DecisionRequest });
export type InputRecord = z.infer<typeof InputRecord>;

/**
 * One line as the worker checks it at validation: exactly these two fields, `body` any JSON (a body
 * that is not a valid decision request fails its record, not the file).
 */
export const InputLine = fields({ custom_id: CustomId, body: JsonValue });

export const RecordError = z.object({ status: z.number().int(), code: z.string(), message: z.string() });

export const ResultRecord = z.union([
  z.strictObject({ custom_id: z.string(), response: DecisionResponse }),
  z.strictObject({ custom_id: z.string(), error: RecordError }),
]);
export type ResultRecord = z.infer<typeof ResultRecord>;

export const ResultsPage = z.object({
  object: z.literal("list"),
  data: z.array(ResultRecord),
  /** The input line number of this page's last record, to pass as `after`; null on the last page. */
  next_cursor: z.number().int().nullable(),
});
export type ResultsPage = z.infer<typeof ResultsPage>;
