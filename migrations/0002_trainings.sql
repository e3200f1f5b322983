-- Customer training (issue 25): training jobs, their examples, and trained releases. A trained
-- release is a release like a calibrated one: it runs on its base release's runtime, and what it
-- adds (the saved task and the trained head) is part of its immutable identity.

ALTER TABLE model_releases
  ADD COLUMN task jsonb,
  ADD COLUMN head jsonb,
  ADD COLUMN training_id uuid;

CREATE OR REPLACE FUNCTION model_release_immutable() RETURNS trigger AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.fingerprint <> OLD.fingerprint
     OR NEW.base_release IS DISTINCT FROM OLD.base_release OR NEW.calibration IS DISTINCT FROM OLD.calibration
     OR NEW.task IS DISTINCT FROM OLD.task OR NEW.head IS DISTINCT FROM OLD.head
     OR NEW.training_id IS DISTINCT FROM OLD.training_id THEN
    RAISE EXCEPTION 'release % is immutable: id, fingerprint, base, calibration, task, head and training cannot change', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

DROP VIEW model_registry;
CREATE VIEW model_registry AS
  SELECT r.id, r.fingerprint,
         coalesce(array_agg(a.alias ORDER BY a.alias) FILTER (WHERE a.alias IS NOT NULL), '{}') AS aliases,
         r.owners, r.url, r.token_env, r.release_date, r.description, r.retired_at, r.sidecar_url,
         coalesce(b.id, r.id) AS runtime_release, coalesce(b.fingerprint, r.fingerprint) AS runtime_fingerprint,
         r.calibration, r.calibration_report IS NOT NULL AS has_calibration_report, r.revision,
         r.task, r.head, r.training_id
    FROM model_releases r
    LEFT JOIN model_releases b ON b.id = r.base_release
    LEFT JOIN model_aliases a ON a.release_id = r.id
   GROUP BY r.id, b.id;

CREATE FUNCTION training_status_terminal(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('ready', 'rejected', 'failed', 'cancelled', 'expired');

CREATE TABLE trainings (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id         uuid NOT NULL REFERENCES accounts (id),
  idempotency_key    text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  status             text NOT NULL DEFAULT 'uploading'
                     CHECK (status IN ('uploading', 'queued', 'validating', 'running', 'accepted', 'ready', 'rejected', 'failed', 'cancelled', 'expired')),
  base_model         text NOT NULL,
  base_release       text,
  object_key         text NOT NULL,
  input_bytes        bigint CHECK (input_bytes >= 0),
  task               jsonb,
  total_examples     integer NOT NULL DEFAULT 0 CHECK (total_examples >= 0),
  held_out_examples  integer NOT NULL DEFAULT 0 CHECK (held_out_examples >= 0),
  examples_read      integer NOT NULL DEFAULT 0 CHECK (examples_read >= 0),
  report             jsonb,
  model_id           text,
  error              jsonb,
  lease_token        uuid,
  lease_expires_at   timestamptz,
  last_claimed_at    timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  submitted_at       timestamptz,
  started_at         timestamptz,
  finished_at        timestamptz,
  expires_at         timestamptz NOT NULL,
  purged_at          timestamptz,
  UNIQUE (account_id, idempotency_key),
  CONSTRAINT trainings_finished_when_terminal CHECK (training_status_terminal(status) = (finished_at IS NOT NULL))
);
CREATE INDEX trainings_by_account ON trainings (account_id, created_at DESC, id DESC);
CREATE INDEX trainings_open ON trainings (last_claimed_at NULLS FIRST)
  WHERE status IN ('queued', 'validating', 'running', 'accepted');

CREATE TABLE training_examples (
  training_id  uuid NOT NULL REFERENCES trainings (id) ON DELETE CASCADE,
  line         integer NOT NULL CHECK (line >= 1),
  custom_id    text NOT NULL,
  state        text NOT NULL,
  outcomes     integer[] NOT NULL,
  held_out     boolean NOT NULL,
  features     real[],
  zero_shot    jsonb,
  read_at      timestamptz,
  PRIMARY KEY (training_id, line)
);
CREATE INDEX training_examples_pending ON training_examples (training_id, line) WHERE features IS NULL;
