-- A batch that froze a release retired since (an owner retiring a trained model, an operator
-- retiring a release) completes: its pending records on that release are claimed by any worker and
-- answered with an error record, where before they were never claimed and the batch expired.

CREATE FUNCTION release_retired(p_release text) RETURNS boolean
  LANGUAGE sql STABLE
  RETURN EXISTS (SELECT 1 FROM model_releases WHERE id = p_release AND retired_at IS NOT NULL);

-- The bulk worker's claim (sidecar/bulk/worker.ts), in one round trip: leases to p_token, for
-- p_lease_ms, the batch that waited longest for a turn (never one of a disabled account or past its
-- deadline, never one leased to another worker) and has work this worker can do: a queued batch to
-- validate, or a running batch with a pending record whose release is served here (p_served), or
-- that has none or a retired one (an error record), and that is not waiting after a transient
-- failure. For a running batch it returns that record, with the revision of its release's row when
-- that release is served at p_self (null otherwise). No row: nothing to do.
CREATE OR REPLACE FUNCTION bulk_claim(p_token uuid, p_lease_ms double precision, p_served text[], p_self text)
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
       ORDER BY line LIMIT 1) r ON claimed.status = 'running'
$$ LANGUAGE sql;
