-- Webhooks (contract/webhooks.ts): an account's endpoints, and the outbox of their deliveries. A
-- delivery row is written by the trigger below in the same transaction as the job's move into a
-- terminal status, whichever statement makes it (complete, accept, activate, reject, fail, cancel,
-- expire), so an event exists exactly when its change committed; the sidecar's worker sends it.
CREATE TABLE webhook_endpoints (
  id                   uuid PRIMARY KEY,
  account_id           uuid NOT NULL REFERENCES accounts (id),
  url                  text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
  description          text CHECK (length(description) <= 256),
  events               text[] NOT NULL CHECK (cardinality(events) >= 1),
  -- whsec_...: the current signing secret, and the previous one while it still signs after a rotation.
  secret               text NOT NULL,
  previous_secret      text,
  previous_secret_until timestamptz,
  secret_rotated_at    timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_by_account ON webhook_endpoints (account_id, created_at);

CREATE TABLE webhook_deliveries (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  endpoint_id       uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  -- One id per event, the same for every endpoint and every attempt: the webhook-id header.
  event_id          uuid NOT NULL,
  event_type        text NOT NULL,
  job_id            uuid NOT NULL,
  -- The body sent, built at the commit: the job's id, status and metadata as they were then.
  payload           jsonb NOT NULL,
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts          integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  -- Held by a sidecar's attempt until then; a sidecar that died mid-attempt leaves it to be taken again.
  lease_expires_at  timestamptz,
  last_attempt_at   timestamptz,
  last_status_code  integer,
  last_error        text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  finished_at       timestamptz,
  UNIQUE (endpoint_id, event_id),
  CONSTRAINT webhook_deliveries_finished_when_done CHECK ((status = 'pending') = (finished_at IS NULL))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE status <> 'pending';

-- The outbox: one delivery per endpoint of the job's account subscribed to `<kind>.<status>`.
CREATE FUNCTION job_webhook_outbox() RETURNS trigger AS $$
DECLARE
  v_kind text := TG_ARGV[0];
  v_event text := TG_ARGV[0] || '.' || NEW.status;
  v_event_id uuid := gen_random_uuid();
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, job_id, payload)
  SELECT e.id, v_event_id, v_event, NEW.id,
         jsonb_build_object(
           'type', v_event,
           'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'data', jsonb_build_object('object', v_kind, 'id', NEW.id, 'status', NEW.status, 'metadata', NEW.metadata))
    FROM webhook_endpoints e
   WHERE e.account_id = NEW.account_id AND v_event = ANY (e.events);
  RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER batch_webhook_outbox AFTER UPDATE OF status ON batches
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND batch_status_terminal(NEW.status))
  EXECUTE FUNCTION job_webhook_outbox('batch');
CREATE TRIGGER training_webhook_outbox AFTER UPDATE OF status ON trainings
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND training_status_terminal(NEW.status))
  EXECUTE FUNCTION job_webhook_outbox('training');
