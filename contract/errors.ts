/**
 * The one error envelope of the gateway, and the table from stable machine codes to HTTP statuses.
 *
 *     { "error": { "code": "not_found", "message": "model 'x' not found", "status": 404 } }
 *
 * A bulk per-record error carries the same triple. Third-party clients read `error.message`.
 */
import { z } from "zod";
import { looseFields } from "./fields.ts";

export const ERROR_STATUS = {
  bad_request: 400,
  /** A storage upload whose bytes do not have the SHA-256 its grant names (nothing is stored). */
  checksum_mismatch: 400,
  unauthorized: 401,
  missing_credentials: 401,
  invalid_credentials: 401,
  revoked_key: 401,
  /** A key past the expiry it was created with. */
  expired_key: 401,
  account_disabled: 401,
  wrong_credential_kind: 401,
  forbidden: 403,
  /** A key created for less than this call: another kind of route, or a model it may not name. */
  insufficient_scope: 403,
  signature_invalid: 403,
  grant_expired: 403,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  upload_incomplete: 409,
  /** A create repeating an idempotency key with a different input size than the job it made. */
  idempotency_conflict: 409,
  batch_not_submittable: 409,
  /** The account has as many webhook endpoints as it may (contract/webhooks.ts WEBHOOK_LIMITS.endpoints). */
  webhook_endpoint_limit: 409,
  batch_not_finished: 409,
  /** An image decision whose worst case is more than the account's prepaid credit, refused before any GPU work. */
  insufficient_credit: 402,
  training_not_submittable: 409,
  report_not_ready: 409,
  /** Another completion of this image asset is running; retry after `retry-after`. */
  asset_finalizing: 409,
  image_asset_limit: 429,
  image_completion_limit: 429,
  gone: 410,
  results_expired: 410,
  length_required: 411,
  already_uploaded: 412,
  payload_too_large: 413,
  /** An image decision whose actual model context (its visual tokens) is over what the runtime takes. */
  context_too_large: 413,
  invalid_request: 422,
  pass_too_long: 422,
  task_mismatch: 422,
  /** The stored upload's size or SHA-256 is not the one declared at creation. */
  upload_mismatch: 422,
  /** An image refused on completion (contract/images.ts IMAGE_REFUSALS), before any GPU work. */
  image_unsupported: 422,
  image_type_mismatch: 422,
  image_truncated: 422,
  image_animated: 422,
  image_too_large: 422,
  image_undecodable: 422,
  rate_limited: 429,
  active_batch_limit: 429,
  batch_storage_limit: 429,
  active_training_limit: 429,
  stored_training_limit: 429,
  internal_error: 500,
  bad_gateway: 502,
  unavailable: 503,
  quota_unavailable: 503,
  identity_mismatch: 503,
  timeout: 504,
  lane_full: 529,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const ErrorEnvelope = looseFields({
  error: looseFields({
    code: z.string(),
    message: z.string(),
    status: z.number().int(),
  }),
});
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

export function errorBody(code: ErrorCode, message: string): ErrorEnvelope {
  return { error: { code, message, status: ERROR_STATUS[code] } };
}
