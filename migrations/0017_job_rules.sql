-- The job rules written once (issue 58): which statuses are open, which job may be claimed and in
-- what turn, the lease fence, and which batch record may run are functions that the store's
-- statements and the bulk functions call (schema.sql has each rule's comment). The open-job
-- indexes are rebuilt on the same functions, so the claims' order and condition still use them.

-- The statuses a worker may claim a batch, a training in.
CREATE FUNCTION batch_status_open(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('queued', 'validating', 'running');

CREATE FUNCTION training_status_open(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('queued', 'validating', 'running', 'accepted');

-- The order in which claimable jobs take turns, as a sort key: first the job whose last claim is
-- oldest (one never claimed before any other), then the one submitted first.
CREATE FUNCTION job_turn(last_claimed_at timestamptz, submitted_at timestamptz) RETURNS timestamptz[]
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN ARRAY[coalesce(last_claimed_at, '-infinity'), submitted_at];

-- Whether a lease (of a job, an image asset or a webhook delivery) is free: none was taken, or it
-- ended.
CREATE FUNCTION lease_free(lease_expires_at timestamptz) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN lease_expires_at IS NULL OR lease_expires_at <= now();

-- Whether an account's jobs may run: it is active.
CREATE FUNCTION account_active(account_id uuid) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN EXISTS (SELECT 1 FROM accounts a WHERE a.id = account_id AND a.status = 'active');

-- Which job a worker may claim: open (the kind's `<kind>_status_open`), before its deadline, its
-- lease free (never one leased to another worker) and its account active.
CREATE FUNCTION job_claimable(open boolean, expires_at timestamptz, lease_expires_at timestamptz, account_id uuid) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN open AND expires_at > now() AND lease_free(lease_expires_at) AND account_active(account_id);

-- The fence: a step's write presents its lease's token (`presented`), and changes nothing unless
-- that lease is still the job's and unexpired, the job is not terminal (the kind's
-- `<kind>_status_terminal`) and its account is active. False, never null, when no lease is held.
CREATE FUNCTION job_lease_held(lease_token uuid, presented uuid, lease_expires_at timestamptz, terminal boolean, account_id uuid) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN coalesce(lease_token = presented AND lease_expires_at > now() AND NOT terminal, false) AND account_active(account_id);

-- Which record of a running batch a worker may run now: not done, not waiting after a transient
-- failure, and on a release served here (`served`), or on none or a retired one (answered with an
-- error record by any worker).
CREATE FUNCTION batch_record_runnable(done boolean, not_before timestamptz, release_id text, served text[]) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN NOT done AND (not_before IS NULL OR not_before <= now())
         AND (release_id IS NULL OR release_id = ANY (served) OR release_retired(release_id));

DROP INDEX batches_open;
CREATE INDEX batches_open ON batches (job_turn(last_claimed_at, submitted_at)) WHERE batch_status_open(status);
DROP INDEX trainings_open;
CREATE INDEX trainings_open ON trainings (job_turn(last_claimed_at, submitted_at)) WHERE training_status_open(status);

CREATE OR REPLACE FUNCTION bulk_commit_records(
  p_batch uuid, p_token uuid, p_lines integer[], p_custom_ids text[], p_results text[],
  p_releases text[], p_input_tokens integer[], p_output_tokens integer[], p_billable integer[]
) RETURNS text AS $$
DECLARE
  b batches%ROWTYPE;
  v_answered integer;
  v_failed integer;
BEGIN
  SELECT * INTO b FROM batches WHERE id = p_batch FOR UPDATE;
  IF NOT FOUND OR NOT job_lease_held(b.lease_token, p_token, b.lease_expires_at, batch_status_terminal(b.status), b.account_id) THEN
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
    SELECT b.account_id, b.submitted_by_key, fresh.release_id, 'bulk', 'batch_' || p_batch || '_' || fresh.line,
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

CREATE OR REPLACE FUNCTION bulk_claim_records(p_token uuid, p_lease_ms double precision, p_served text[], p_self text, p_records integer)
RETURNS SETOF bulk_claim_row AS $$
  WITH claimed AS (
    UPDATE batches b
       SET lease_token = p_token, lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000),
           last_claimed_at = clock_timestamp(),
           status = CASE WHEN b.status = 'queued' THEN 'validating' ELSE b.status END,
           started_at = coalesce(b.started_at, now())
      FROM accounts a
     WHERE a.id = b.account_id AND b.id = (
       SELECT c.id FROM batches c
        WHERE job_claimable(batch_status_open(c.status), c.expires_at, c.lease_expires_at, c.account_id)
          AND (c.status <> 'running' OR EXISTS (
                SELECT 1 FROM batch_records r WHERE r.batch_id = c.id AND batch_record_runnable(r.done, r.not_before, r.release_id, p_served)))
        ORDER BY job_turn(c.last_claimed_at, c.submitted_at)
        LIMIT 1
        FOR UPDATE OF c SKIP LOCKED)
    RETURNING b.id, b.status, b.account_id, b.object_key, b.expires_at, b.models, a.requests_per_second, a.tokens_per_second)
  SELECT claimed.*, r.line, r.custom_id, r.body, r.attempts, r.release_id,
         (SELECT revision FROM model_releases WHERE id = r.release_id AND retired_at IS NULL AND sidecar_url = p_self)
    FROM claimed
    LEFT JOIN LATERAL (
      SELECT line, custom_id, body, attempts, release_id FROM batch_records r
       WHERE r.batch_id = claimed.id AND batch_record_runnable(r.done, r.not_before, r.release_id, p_served)
       ORDER BY line LIMIT greatest(p_records, 1)) r ON claimed.status = 'running'
   ORDER BY r.line
$$ LANGUAGE sql;
