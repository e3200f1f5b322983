/**
 * The usage report's rows, as SQL (read by the edge's GET /v1/usage, edge/routes/usage.ts; the
 * sidecar writes usage rows, sidecar/usage.ts and schema.sql's bulk_commit_records).
 */

/**
 * Every usage row and settled credit charge of the account in [$2, $3), with its UTC day and key (a
 * row's own; a charge's the one its decision's usage row names). Both read through the account's
 * indexes (usage_records_by_account, and the credit reservations'), whatever the number of batches.
 */
export const USAGE_ENTRIES = `
  SELECT (u.created_at AT TIME ZONE 'UTC')::date AS day, u.key_id,
         (u.source = 'realtime')::int AS requests, (u.source = 'bulk')::int AS batch_records,
         u.input_tokens, coalesce(u.billable_input_tokens, 0) AS billable_input_tokens,
         (u.billable_input_tokens IS NULL)::int AS billable_unreported, u.output_tokens, 0::bigint AS image_credit_micro_usd
    FROM usage_records u
   WHERE u.account_id = $1 AND u.created_at >= $2 AND u.created_at < $3
  UNION ALL
  SELECT (r.finished_at AT TIME ZONE 'UTC')::date,
         -- The decision's own row, written after the reservation and about when it is settled (the sidecar
         -- records usage once it has answered, the edge settles once it has the answer): the account's
         -- index narrows the search to that span.
         (SELECT u.key_id FROM usage_records u
           WHERE u.account_id = r.account_id AND u.created_at >= r.created_at AND u.created_at < r.finished_at + interval '1 minute'
             AND u.request_id = r.request_id LIMIT 1),
         0, 0, 0, 0, 0, 0, r.charged_micro_usd
    FROM credit_reservations r
   WHERE r.account_id = $1 AND r.status = 'settled' AND r.finished_at >= $2 AND r.finished_at < $3`;
