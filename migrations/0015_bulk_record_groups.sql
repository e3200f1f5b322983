-- Bulk claims carry several records (issue 37): bulk_claim_records leases a running batch with up
-- to p_records of its next records, and bulk_commit_records commits a claim's records together.
-- The single-record functions of before become the same for one record, so that a sidecar of the
-- previous version keeps working until its host is upgraded.

-- A claim's records committed together, in one round trip (sidecar/bulk/steps.ts): under the batch's
-- row lock, checks the claim's fence (token, unexpired lease, batch not terminal, account active),
-- marks each record done (once: a line already done is skipped, and its first result and usage row
-- stay), writes each result and, for an answer, its usage row, counts them, completes the batch when
-- its last record is done, and releases the lease. The arrays hold one entry per record, in the same
-- order; an entry without a release is an error record. Returns 'committed', 'fenced' (nothing
-- written; the lease is not this worker's) or 'duplicate' (every line was done already: nothing
-- written; the lease released).
CREATE FUNCTION bulk_commit_records(
  p_batch uuid, p_token uuid, p_lines integer[], p_custom_ids text[], p_results text[],
  p_releases text[], p_input_tokens integer[], p_output_tokens integer[], p_billable integer[]
) RETURNS text AS $$
DECLARE
  b batches%ROWTYPE;
  v_answered integer;
  v_failed integer;
BEGIN
  SELECT * INTO b FROM batches WHERE id = p_batch FOR UPDATE;
  IF NOT FOUND OR b.lease_token IS DISTINCT FROM p_token OR b.lease_expires_at <= now()
     OR batch_status_terminal(b.status)
     OR NOT EXISTS (SELECT 1 FROM accounts WHERE id = b.account_id AND status = 'active') THEN
    RETURN 'fenced';
  END IF;
  WITH given AS (
    SELECT DISTINCT ON (t.line) t.*
      FROM unnest(p_lines, p_custom_ids, p_results, p_releases, p_input_tokens, p_output_tokens, p_billable)
        AS t(line, custom_id, result, release_id, input_tokens, output_tokens, billable)
     ORDER BY t.line),
  marked AS (
    UPDATE batch_records r SET done = true FROM given
     WHERE r.batch_id = p_batch AND r.line = given.line AND NOT r.done
    RETURNING r.line),
  fresh AS (SELECT given.* FROM given JOIN marked ON marked.line = given.line),
  stored AS (
    INSERT INTO batch_results (batch_id, line, custom_id, result)
    SELECT p_batch, fresh.line, fresh.custom_id, fresh.result::json FROM fresh),
  used AS (
    INSERT INTO usage_records (account_id, key_id, release_id, source, request_id, input_tokens, output_tokens, billable_input_tokens)
    SELECT b.account_id, NULL, fresh.release_id, 'bulk', 'batch_' || p_batch || '_' || fresh.line,
           fresh.input_tokens, fresh.output_tokens, fresh.billable
      FROM fresh WHERE fresh.release_id IS NOT NULL)
  SELECT count(*) FILTER (WHERE fresh.release_id IS NOT NULL), count(*) FILTER (WHERE fresh.release_id IS NULL)
    INTO v_answered, v_failed FROM fresh;
  IF v_answered + v_failed = 0 THEN
    UPDATE batches SET lease_token = NULL, lease_expires_at = NULL WHERE id = p_batch;
    RETURN 'duplicate';
  END IF;
  UPDATE batches
     SET completed_records = completed_records + v_answered,
         failed_records = failed_records + v_failed,
         lease_token = NULL, lease_expires_at = NULL,
         status = CASE WHEN EXISTS (SELECT 1 FROM batch_records WHERE batch_id = p_batch AND NOT done) THEN status ELSE 'completed' END,
         finished_at = CASE WHEN EXISTS (SELECT 1 FROM batch_records WHERE batch_id = p_batch AND NOT done) THEN finished_at ELSE now() END
   WHERE id = p_batch;
  RETURN 'committed';
END
$$ LANGUAGE plpgsql;

-- The bulk worker's claim (sidecar/bulk/steps.ts), in one round trip: leases to p_token, for
-- p_lease_ms, the batch that waited longest for a turn (never one of a disabled account or past its
-- deadline, never one leased to another worker) and has work this worker can do: a queued batch to
-- validate, or a running batch with a pending record whose release is served here (p_served), or
-- that has none or a retired one (an error record), and that is not waiting after a transient
-- failure. For a running batch it returns up to p_records such records, a row each in line order,
-- each with the revision of its release's row when that release is served at p_self (null
-- otherwise). No row: nothing to do.
CREATE FUNCTION bulk_claim_records(p_token uuid, p_lease_ms double precision, p_served text[], p_self text, p_records integer)
RETURNS SETOF bulk_claim_row AS $$
  WITH claimed AS (
    UPDATE batches b
       SET lease_token = p_token, lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000),
           last_claimed_at = clock_timestamp(),
           status = CASE WHEN b.status = 'queued' THEN 'validating' ELSE b.status END,
           started_at = coalesce(b.started_at, now())
      FROM accounts a
     WHERE a.id = b.account_id AND b.id = (
       SELECT c.id FROM batches c JOIN accounts ca ON ca.id = c.account_id
        WHERE c.status IN ('queued', 'validating', 'running') AND ca.status = 'active' AND c.expires_at > now()
          AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
          AND (c.status <> 'running' OR EXISTS (
                SELECT 1 FROM batch_records r WHERE r.batch_id = c.id AND NOT r.done
                   AND (r.release_id IS NULL OR r.release_id = ANY (p_served) OR release_retired(r.release_id))
                   AND (r.not_before IS NULL OR r.not_before <= now())))
        ORDER BY c.last_claimed_at NULLS FIRST, c.submitted_at
        LIMIT 1
        FOR UPDATE OF c SKIP LOCKED)
    RETURNING b.id, b.status, b.account_id, b.object_key, b.expires_at, b.models, a.requests_per_second, a.tokens_per_second)
  SELECT claimed.*, r.line, r.custom_id, r.body, r.attempts, r.release_id,
         (SELECT revision FROM model_releases WHERE id = r.release_id AND retired_at IS NULL AND sidecar_url = p_self)
    FROM claimed
    LEFT JOIN LATERAL (
      SELECT line, custom_id, body, attempts, release_id FROM batch_records r
       WHERE r.batch_id = claimed.id AND NOT r.done
         AND (r.release_id IS NULL OR r.release_id = ANY (p_served) OR release_retired(r.release_id))
         AND (r.not_before IS NULL OR r.not_before <= now())
       ORDER BY line LIMIT greatest(p_records, 1)) r ON claimed.status = 'running'
   ORDER BY r.line
$$ LANGUAGE sql;

-- A claim's commit (bulk_commit_records) and the worker's next claim (bulk_claim_records), in one
-- round trip: the lease is released by the commit before the claim looks for the batch that waited
-- longest, so the batches still take turns.
CREATE FUNCTION bulk_commit_records_and_claim(
  p_batch uuid, p_token uuid, p_lines integer[], p_custom_ids text[], p_results text[],
  p_releases text[], p_input_tokens integer[], p_output_tokens integer[], p_billable integer[],
  p_next_token uuid, p_lease_ms double precision, p_served text[], p_self text, p_records integer
) RETURNS SETOF bulk_claim_row AS $$
  SELECT bulk_commit_records(p_batch, p_token, p_lines, p_custom_ids, p_results, p_releases, p_input_tokens, p_output_tokens, p_billable);
  SELECT * FROM bulk_claim_records(p_next_token, p_lease_ms, p_served, p_self, p_records);
$$ LANGUAGE sql;

-- The single-record forms the sidecars of before issue 37 call, kept so that they keep working while
-- the hosts are upgraded one at a time (docs/deploy.md section 11): each is the form above for one
-- record. A later migration may drop them once no sidecar of that version runs.
CREATE OR REPLACE FUNCTION bulk_commit(
  p_batch uuid, p_token uuid, p_line integer, p_custom_id text, p_result text,
  p_release text, p_input_tokens integer, p_output_tokens integer, p_billable integer
) RETURNS text AS $$
  SELECT bulk_commit_records(p_batch, p_token, ARRAY[p_line], ARRAY[p_custom_id], ARRAY[p_result],
                             ARRAY[p_release], ARRAY[p_input_tokens], ARRAY[p_output_tokens], ARRAY[p_billable]);
$$ LANGUAGE sql;

CREATE OR REPLACE FUNCTION bulk_claim(p_token uuid, p_lease_ms double precision, p_served text[], p_self text)
RETURNS SETOF bulk_claim_row AS $$
  SELECT * FROM bulk_claim_records(p_token, p_lease_ms, p_served, p_self, 1);
$$ LANGUAGE sql;

CREATE OR REPLACE FUNCTION bulk_commit_and_claim(
  p_batch uuid, p_token uuid, p_line integer, p_custom_id text, p_result text,
  p_release text, p_input_tokens integer, p_output_tokens integer, p_billable integer,
  p_next_token uuid, p_lease_ms double precision, p_served text[], p_self text
) RETURNS SETOF bulk_claim_row AS $$
  SELECT bulk_commit(p_batch, p_token, p_line, p_custom_id, p_result, p_release, p_input_tokens, p_output_tokens, p_billable);
  SELECT * FROM bulk_claim(p_next_token, p_lease_ms, p_served, p_self);
$$ LANGUAGE sql;
