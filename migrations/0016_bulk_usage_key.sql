-- A batch's usage is the submitting key's (issue 54): a key that submits another key's batch runs it
-- under its own limits and is billed for it. `submitted_by_key` records that key at submit; a
-- committed record's usage row names it, so the usage route reads every row's key from the row itself
-- (before, a bulk row had no key and the route looked its batch up by a text match no index served).

ALTER TABLE batches ADD COLUMN submitted_by_key text;

-- Batches submitted before: the creator is the best knowledge of who submitted them.
UPDATE batches SET submitted_by_key = created_by_key WHERE submitted_at IS NOT NULL;
-- Once, so a text match serves (a request id that names no batch is left without a key).
UPDATE usage_records u SET key_id = b.created_by_key
  FROM batches b
 WHERE u.source = 'bulk' AND u.key_id IS NULL
   AND b.account_id = u.account_id AND b.id::text = substr(u.request_id, 7, 36);

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
