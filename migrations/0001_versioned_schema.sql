-- Version 0 is the last unversioned schema.sql (commit e05f56b), which every `npm run db:migrate`
-- before this one applied whole. From it to the first versioned schema: the table of applied
-- versions, and the batch terminal statuses written once (batch_status_terminal) for the batches
-- CHECK and bulk_commit, whose behaviour is unchanged.

CREATE TABLE schema_migrations (
  version     integer PRIMARY KEY CHECK (version >= 1),
  name        text NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION batch_status_terminal(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('completed', 'failed', 'cancelled', 'expired');

-- The same rule as the unnamed CHECK it replaces, so every existing row passes it.
ALTER TABLE batches
  DROP CONSTRAINT batches_check,
  ADD CONSTRAINT batches_finished_when_terminal CHECK (batch_status_terminal(status) = (finished_at IS NOT NULL));

CREATE OR REPLACE FUNCTION bulk_commit(
  p_batch uuid, p_token uuid, p_line integer, p_custom_id text, p_result text,
  p_release text, p_input_tokens integer, p_output_tokens integer, p_billable integer
) RETURNS text AS $$
DECLARE
  b batches%ROWTYPE;
  answered boolean := p_release IS NOT NULL;
BEGIN
  SELECT * INTO b FROM batches WHERE id = p_batch FOR UPDATE;
  IF NOT FOUND OR b.lease_token IS DISTINCT FROM p_token OR b.lease_expires_at <= now()
     OR batch_status_terminal(b.status)
     OR NOT EXISTS (SELECT 1 FROM accounts WHERE id = b.account_id AND status = 'active') THEN
    RETURN 'fenced';
  END IF;
  UPDATE batch_records SET done = true WHERE batch_id = p_batch AND line = p_line AND NOT done;
  IF NOT FOUND THEN
    UPDATE batches SET lease_token = NULL, lease_expires_at = NULL WHERE id = p_batch;
    RETURN 'duplicate';
  END IF;
  INSERT INTO batch_results (batch_id, line, custom_id, result) VALUES (p_batch, p_line, p_custom_id, p_result::json);
  IF answered THEN
    INSERT INTO usage_records (account_id, key_id, release_id, source, request_id, input_tokens, output_tokens, billable_input_tokens)
    VALUES (b.account_id, NULL, p_release, 'bulk', 'batch_' || p_batch || '_' || p_line, p_input_tokens, p_output_tokens, p_billable);
  END IF;
  UPDATE batches
     SET completed_records = completed_records + answered::int,
         failed_records = failed_records + (NOT answered)::int,
         lease_token = NULL, lease_expires_at = NULL,
         status = CASE WHEN EXISTS (SELECT 1 FROM batch_records WHERE batch_id = p_batch AND NOT done) THEN status ELSE 'completed' END,
         finished_at = CASE WHEN EXISTS (SELECT 1 FROM batch_records WHERE batch_id = p_batch AND NOT done) THEN finished_at ELSE now() END
   WHERE id = p_batch;
  RETURN 'committed';
END
$$ LANGUAGE plpgsql;
