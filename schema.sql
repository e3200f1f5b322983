-- The database as this checkout expects it. `npm run db:migrate` (ops/migrate.ts) gives an empty
-- database this file whole and records the latest version of migrations/; an existing database gets
-- the numbered files of migrations/ instead, so a change here comes with a migration that makes an
-- existing database the same (test/migrate.test.ts compares the two catalogs).

-- The job rules (server-shared/jobs/store.ts): each written once, here, as a function the store's
-- statements and the bulk functions below call; test/job-rules.test.ts fails on a second copy.
-- These come first because the tables' CHECKs and indexes call them; the ones that read tables are
-- with the functions below.

-- The batch statuses that end a batch (contract/batches.ts TERMINAL_STATUSES), and those a worker
-- may claim a batch in.
CREATE FUNCTION batch_status_terminal(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('completed', 'failed', 'cancelled', 'expired');

CREATE FUNCTION batch_status_open(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('queued', 'validating', 'running');

-- The training statuses that end a training job (contract/trainings.ts TRAINING_TERMINAL_STATUSES),
-- and those a worker may claim a training in.
CREATE FUNCTION training_status_terminal(status text) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('ready', 'rejected', 'failed', 'cancelled', 'expired');

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

-- Tables

-- The migrations applied to this database (migrations/NNNN_name.sql); a database built from this
-- file has one row, the latest version at the time.
CREATE TABLE schema_migrations (
  version     integer PRIMARY KEY CHECK (version >= 1),
  name        text NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Model registry: an immutable release (weights + adapter + rendering, named by its fingerprint)
-- served by one runtime address. Its id, fingerprint, base and calibration never change (trigger
-- below); any other change bumps `revision`, which the edge names to the sidecar, whose registry
-- entries are kept by it, so a change applies on the next request with no lookup per request.
CREATE TABLE model_releases (
  id                  text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
  fingerprint         text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  owners              uuid[],                       -- null: shared by every account
  url                 text NOT NULL,                -- runtime address
  token_env           text NOT NULL CHECK (token_env ~ '^[A-Z_][A-Z0-9_]*$'),
  -- The sidecar that serves the release: the edge forwards its decisions there, and the sidecar
  -- whose SIDECAR_URL it is calls the runtime. Null: registered but not served yet.
  sidecar_url         text,
  release_date        date NOT NULL,
  description         text NOT NULL DEFAULT '',
  -- A calibrated release (`npm run registry -- calibrate`) runs on its base release's runtime with
  -- calibration parameters applied by the readout; its fingerprint covers the base's and the
  -- parameters'. The report is what GET /v1/models/{model}/calibration publishes.
  base_release        text REFERENCES model_releases (id),
  calibration         jsonb,
  calibration_report  jsonb,
  -- A trained release (a customer's, server-shared/trained.ts) runs on its base release's runtime
  -- too: `task` is the question set every request to it must repeat, `head` the trained parameters
  -- the readout applies to the base's hidden state, `training_id` the job whose report it has. Its
  -- fingerprint covers the base's, the task's and the head's.
  task                jsonb,
  head                jsonb,
  training_id         uuid,
  -- What its runtime reads: text (the decision's state and questions) or an image (a still photo,
  -- with one choice question). A calibrated or trained release reads what its base reads.
  modality            text NOT NULL DEFAULT 'text' CHECK (modality IN ('text', 'image')),
  revision            bigint NOT NULL DEFAULT 1,
  created_at          timestamptz NOT NULL DEFAULT now(),
  retired_at          timestamptz
);

-- Aliases that point at releases.
CREATE TABLE model_aliases (
  alias       text PRIMARY KEY CHECK (alias ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
  release_id  text NOT NULL REFERENCES model_releases (id),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Accounts: created when a signed-in user issues their first key. Quota settings are null (no
-- quota) or positive.
CREATE TABLE accounts (
  id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  idp_issuer               text NOT NULL,
  idp_subject              text NOT NULL,
  status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  requests_per_second      integer CHECK (requests_per_second > 0),
  tokens_per_second        bigint CHECK (tokens_per_second > 0),
  max_active_batches       integer CHECK (max_active_batches > 0),
  max_batch_storage_bytes  bigint CHECK (max_batch_storage_bytes > 0),
  created_at               timestamptz NOT NULL DEFAULT now(),
  UNIQUE (idp_issuer, idp_subject)
);

-- API keys: only the SHA-256 digest of the secret is kept.
CREATE TABLE api_keys (
  id          text PRIMARY KEY CHECK (id ~ '^[a-z2-7]{26}$'),
  account_id  uuid NOT NULL REFERENCES accounts (id),
  name        text NOT NULL,
  digest      text NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz,
  -- A key created for less (contract/keys.ts): when it stops working, what routes, which model names.
  expires_at  timestamptz,
  scope       text CHECK (scope IN ('decisions', 'decisions_and_batches')),
  models      text[] CHECK (models IS NULL OR cardinality(models) BETWEEN 1 AND 16)
);
CREATE INDEX api_keys_by_account ON api_keys (account_id, created_at);

-- Successful input usage, one row per answered decision (real-time) or committed record (bulk),
-- with the key that made it (a batch record's: the key that submitted the batch). Failed or unknown
-- work has no row: absence is not zero.
CREATE TABLE usage_records (
  id                     bigserial PRIMARY KEY,
  account_id             uuid NOT NULL REFERENCES accounts (id),
  key_id                 text,
  release_id             text NOT NULL,
  source                 text NOT NULL CHECK (source IN ('realtime', 'bulk')),
  request_id             text,
  input_tokens           integer NOT NULL CHECK (input_tokens >= 0),
  output_tokens          integer NOT NULL CHECK (output_tokens >= 0),
  billable_input_tokens  integer CHECK (billable_input_tokens >= 0),
  created_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_records_by_account ON usage_records (account_id, created_at);

-- Bulk batches (contract/batches.ts). A batch belongs to an account, not to the key that created
-- it; `idempotency_key` is unique per account. Every batch not yet purged reserves
-- LIMITS.batchStorageReservationBytes of the account's `max_batch_storage_bytes`; a non-terminal one
-- counts against `max_active_batches`. `models` is frozen at submit: the releases and aliases the
-- account could use then through both the creating and the submitting key ({"releases": {id:
-- fingerprint}, "aliases": {alias: id}, "direct": [release ids a record may name by id]}).
-- `submitted_by_key` is the key whose submit queued the batch: its records' usage is that key's.
CREATE TABLE batches (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id         uuid NOT NULL REFERENCES accounts (id),
  idempotency_key    text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  created_by_key     text NOT NULL,
  status             text NOT NULL DEFAULT 'uploading'
                     CHECK (status IN ('uploading', 'queued', 'validating', 'running', 'completed', 'failed', 'cancelled', 'expired')),
  object_key         text NOT NULL,
  input_bytes        bigint CHECK (input_bytes >= 0),
  total_records      integer NOT NULL DEFAULT 0 CHECK (total_records >= 0),
  completed_records  integer NOT NULL DEFAULT 0 CHECK (completed_records >= 0),
  failed_records     integer NOT NULL DEFAULT 0 CHECK (failed_records >= 0),
  models             jsonb,
  error              jsonb,
  -- The bulk worker's claim (sidecar/bulk/worker.ts): a fencing token and when its lease ends; every
  -- write of a step presents the token. `last_claimed_at` lets batches take turns.
  lease_token        uuid,
  lease_expires_at   timestamptz,
  last_claimed_at    timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  submitted_at       timestamptz,
  started_at         timestamptz,
  finished_at        timestamptz,
  expires_at         timestamptz NOT NULL,
  -- Set by cleanup once the input and results are deleted: the storage reservation ends.
  purged_at          timestamptz,
  -- Set by cleanup once a cancelled, failed or expired batch's input file is deleted (its results stay).
  input_deleted_at   timestamptz,
  -- The caller's string pairs given at create (contract/jobs.ts JobMetadata).
  metadata           jsonb CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object'),
  submitted_by_key   text,
  UNIQUE (account_id, idempotency_key),
  CONSTRAINT batches_finished_when_terminal CHECK (batch_status_terminal(status) = (finished_at IS NOT NULL))
);
CREATE INDEX batches_by_account ON batches (account_id, created_at DESC, id DESC);
CREATE INDEX batches_open ON batches (job_turn(last_claimed_at, submitted_at)) WHERE batch_status_open(status);

-- A validated batch's records, one per input line: the body's JSON text, the release its model
-- resolves to among those frozen at submit (null: none; answered with an error record), the
-- transient failures so far, and whether its result is committed. After a transient failure the
-- batch's records on that release wait until `not_before` (2 s, then 4 s), so that a runtime
-- restarting for a few seconds does not use up their attempts at once.
CREATE TABLE batch_records (
  batch_id    uuid NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line        integer NOT NULL CHECK (line >= 1),
  custom_id   text NOT NULL,
  body        text NOT NULL,
  release_id  text,
  attempts    integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  not_before  timestamptz,
  done        boolean NOT NULL DEFAULT false,
  PRIMARY KEY (batch_id, line)
);
CREATE INDEX batch_records_pending ON batch_records (batch_id, line) WHERE NOT done;

-- Committed result records, one per input line (1-based), written once. `committed_at` feeds the
-- status object's progress (records per minute).
CREATE TABLE batch_results (
  batch_id      uuid NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line          integer NOT NULL CHECK (line >= 1),
  custom_id     text NOT NULL,
  result        json NOT NULL,  -- json, not jsonb: the text is kept as committed (key order is meaning)
  committed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (batch_id, line)
);

-- Customer training jobs (contract/trainings.ts), a second kind of leased job (server-shared/jobs/
-- trainings.ts): like a batch, uploaded through a signed PUT, submitted, then claimed by the sidecar
-- that serves `base_release` (resolved from `base_model` at submit). Validation stores the examples
-- and the `task`; each later step extracts one example's features; the last fits and evaluates the
-- candidate (`report`) and either rejects it or registers it as the release `model_id` (status
-- `accepted`), which the serving sidecar verifies before the job is `ready`.
CREATE TABLE trainings (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id         uuid NOT NULL REFERENCES accounts (id),
  idempotency_key    text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  status             text NOT NULL DEFAULT 'uploading'
                     CHECK (status IN ('uploading', 'queued', 'validating', 'running', 'accepted', 'ready', 'rejected', 'failed', 'cancelled', 'expired')),
  base_model         text NOT NULL,
  -- Asked at create: train again without the examples the label audit suspects, and keep whichever
  -- candidate the acceptance rule prefers (sidecar/train/steps.ts).
  exclude_suspected_labels boolean NOT NULL DEFAULT false,
  base_release       text,
  object_key         text NOT NULL,
  input_bytes        bigint CHECK (input_bytes >= 0),
  task               jsonb,
  total_examples     integer NOT NULL DEFAULT 0 CHECK (total_examples >= 0),
  held_out_examples  integer NOT NULL DEFAULT 0 CHECK (held_out_examples >= 0),
  examples_read      integer NOT NULL DEFAULT 0 CHECK (examples_read >= 0),
  report             jsonb,
  -- Held-out figures while examples are read (contract/trainings.ts InterimEvaluation).
  interim            jsonb,
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
  -- Set by cleanup once the training file and examples are deleted.
  purged_at          timestamptz,
  -- The job store's column (server-shared/jobs/store.ts): a training's file goes with its purge.
  input_deleted_at   timestamptz,
  -- The caller's string pairs given at create (contract/jobs.ts JobMetadata).
  metadata           jsonb CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object'),
  UNIQUE (account_id, idempotency_key),
  CONSTRAINT trainings_finished_when_terminal CHECK (training_status_terminal(status) = (finished_at IS NOT NULL))
);
CREATE INDEX trainings_by_account ON trainings (account_id, created_at DESC, id DESC);
CREATE INDEX trainings_open ON trainings (job_turn(last_claimed_at, submitted_at)) WHERE training_status_open(status);

-- A validated training file's examples: the state's JSON text, the true outcome of each question
-- (in the task's order), whether the hash of its custom_id put it in the held-out part, and, once
-- its step has run, its features (the base's hidden state per question, concatenated), the state's
-- sentence embedding and the fingerprint of the encoder that made it (where the runtime has one),
-- and, for a held-out example, the base release's zero-shot distribution per question, and when
-- (`read_at`, for the status's rate).
CREATE TABLE training_examples (
  training_id  uuid NOT NULL REFERENCES trainings (id) ON DELETE CASCADE,
  line         integer NOT NULL CHECK (line >= 1),
  custom_id    text NOT NULL,
  state        text NOT NULL,
  outcomes     integer[] NOT NULL,
  held_out     boolean NOT NULL,
  features     real[],
  zero_shot    jsonb,
  embedding    real[],
  encoder      text,
  read_at      timestamptz,
  -- An image training's example: the asset its features are read from (its state is then the
  -- example's text context, which a trained image model does not read).
  asset_id     uuid,
  PRIMARY KEY (training_id, line),
  CONSTRAINT training_examples_embedding_encoder CHECK ((encoder IS NULL) = (embedding IS NULL))
);
CREATE INDEX training_examples_pending ON training_examples (training_id, line) WHERE features IS NULL;

-- An image asset (contract/images.ts): a photo uploaded through a signed PUT bound to its length
-- and SHA-256, then checked and made canonical by a sidecar while a completion holds the lease
-- (lease_token, lease_expires_at). `attempts` numbers the completions that took the lease; each
-- writes its own canonical object (canonical-<attempt>.png) and only the one that commits while it
-- still holds the lease is kept (canonical_attempt). An asset a training job has taken
-- (training_id) lives until 30 days after that job ends, whatever its `expires_at`; any other until
-- `expires_at` (server-shared/images.ts EXPIRY). Cleanup deletes an asset past that once its upload
-- grant (upload_expires_at) and any lease have lapsed. The filename is display metadata only.
CREATE TABLE image_assets (
  id                 uuid PRIMARY KEY,
  account_id         uuid NOT NULL REFERENCES accounts (id),
  purpose            text NOT NULL CHECK (purpose IN ('prediction', 'training')),
  status             text NOT NULL DEFAULT 'uploading' CHECK (status IN ('uploading', 'ready', 'rejected')),
  filename           text NOT NULL,
  source_bytes       bigint NOT NULL CHECK (source_bytes > 0),
  sha256             text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  created_at         timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  upload_expires_at  timestamptz NOT NULL,
  training_id        uuid REFERENCES trainings (id),
  lease_token        uuid,
  lease_expires_at   timestamptz,
  attempts           integer NOT NULL DEFAULT 0,
  finalized_at       timestamptz,
  source_format      text CHECK (source_format IN ('jpeg', 'png')),
  source_width       integer,
  source_height      integer,
  canonical_attempt  integer,
  canonical_width    integer,
  canonical_height   integer,
  canonical_bytes    bigint,
  canonical_sha256   text,
  error_code         text,
  error_message      text,
  CHECK ((status = 'ready') = (canonical_attempt IS NOT NULL)),
  CHECK ((status = 'rejected') = (error_code IS NOT NULL))
);
CREATE INDEX image_assets_by_expiry ON image_assets (expires_at);
-- The per-account limits count an account's assets (server-shared/images.ts).
CREATE INDEX image_assets_by_account ON image_assets (account_id, created_at);

-- Prepaid credit for image decisions (contract/credit.ts, server-shared/credit.ts), in micro-USD.
-- `balance_micro_usd` is what new reservations may take: granted credit less what was charged and
-- what is reserved now. An account with no row has none.
CREATE TABLE credit_balances (
  account_id         uuid PRIMARY KEY REFERENCES accounts (id),
  balance_micro_usd  bigint NOT NULL DEFAULT 0 CHECK (balance_micro_usd >= 0),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

-- One image decision's hold on credit: its worst case, taken from the balance before any GPU work.
-- It ends once: settled with the actual charge (the rest given back), or released whole, by the
-- decision that made it or, past `expires_at` (an edge that died in between), by the sidecar's sweep.
CREATE TABLE credit_reservations (
  id                 uuid PRIMARY KEY,
  account_id         uuid NOT NULL REFERENCES accounts (id),
  amount_micro_usd   bigint NOT NULL CHECK (amount_micro_usd > 0),
  status             text NOT NULL DEFAULT 'reserved' CHECK (status IN ('reserved', 'settled', 'released')),
  charged_micro_usd  bigint CHECK (charged_micro_usd >= 0),
  request_id         text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  finished_at        timestamptz,
  CHECK (charged_micro_usd <= amount_micro_usd),
  CHECK ((status = 'settled') = (charged_micro_usd IS NOT NULL)),
  CHECK ((status = 'reserved') = (finished_at IS NULL))
);
CREATE INDEX credit_reservations_due ON credit_reservations (expires_at) WHERE status = 'reserved';
CREATE INDEX credit_reservations_settled ON credit_reservations (account_id, finished_at) WHERE status = 'settled';

-- The operator's ledger of credit granted (`npm run account -- credit`); each grant adds to the
-- balance in the same statement.
CREATE TABLE credit_grants (
  id                bigserial PRIMARY KEY,
  account_id        uuid NOT NULL REFERENCES accounts (id),
  amount_micro_usd  bigint NOT NULL CHECK (amount_micro_usd > 0),
  note              text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);

-- Views, functions, triggers and types

-- A release is immutable: its id, fingerprint, base, calibration, task, head and training never change once written. Any
-- other change bumps its revision.
CREATE FUNCTION model_release_immutable() RETURNS trigger AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.fingerprint <> OLD.fingerprint
     OR NEW.base_release IS DISTINCT FROM OLD.base_release OR NEW.calibration IS DISTINCT FROM OLD.calibration
     OR NEW.task IS DISTINCT FROM OLD.task OR NEW.head IS DISTINCT FROM OLD.head
     OR NEW.training_id IS DISTINCT FROM OLD.training_id OR NEW.modality <> OLD.modality THEN
    RAISE EXCEPTION 'release % is immutable: id, fingerprint, base, calibration, task, head, training and modality cannot change', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER model_release_immutable BEFORE UPDATE ON model_releases
  FOR EACH ROW EXECUTE FUNCTION model_release_immutable();

-- The registry as the tiers read it: one row per release with its aliases, and the identity its
-- runtime reports (the base release's, for a calibrated release).
CREATE VIEW model_registry AS
  SELECT r.id, r.fingerprint,
         coalesce(array_agg(a.alias ORDER BY a.alias) FILTER (WHERE a.alias IS NOT NULL), '{}') AS aliases,
         r.owners, r.url, r.token_env, r.release_date, r.description, r.retired_at, r.sidecar_url,
         coalesce(b.id, r.id) AS runtime_release, coalesce(b.fingerprint, r.fingerprint) AS runtime_fingerprint,
         r.calibration, r.calibration_report IS NOT NULL AS has_calibration_report, r.revision,
         r.task, r.head, r.training_id, coalesce(b.modality, r.modality) AS modality
    FROM model_releases r
    LEFT JOIN model_releases b ON b.id = r.base_release
    LEFT JOIN model_aliases a ON a.release_id = r.id
   GROUP BY r.id, b.id;

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

-- A claim's records committed together, in one round trip (sidecar/bulk/commit.ts): under the batch's
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

-- A claim's batch and, for a running batch, one of its next records (bulk_claim_records below: a row each).
CREATE TYPE bulk_claim_row AS (
  id uuid, status text, account_id uuid, object_key text, expires_at timestamptz, models jsonb,
  requests_per_second integer, tokens_per_second bigint,
  line integer, custom_id text, body text, attempts integer, release_id text, release_revision bigint
);

-- Whether a release was retired: a bulk record frozen on it is answered with an error record by
-- any worker (bulk_claim), so a batch that froze a release retired since still completes.
CREATE FUNCTION release_retired(p_release text) RETURNS boolean
  LANGUAGE sql STABLE
  RETURN EXISTS (SELECT 1 FROM model_releases WHERE id = p_release AND retired_at IS NOT NULL);

-- Which record of a running batch a worker may run now: not done, not waiting after a transient
-- failure, and on a release served here (`served`), or on none or a retired one (answered with an
-- error record by any worker).
CREATE FUNCTION batch_record_runnable(done boolean, not_before timestamptz, release_id text, served text[]) RETURNS boolean
  LANGUAGE sql STABLE PARALLEL SAFE
  RETURN NOT done AND (not_before IS NULL OR not_before <= now())
         AND (release_id IS NULL OR release_id = ANY (served) OR release_retired(release_id));

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

-- The single-record forms that sidecars of versions before multi-record claims call, kept so that they keep working while
-- the hosts are upgraded one at a time (docs/deploy.md section 11): each is the form above for one
-- record. A later migration may drop them once no sidecar of that version runs.
CREATE FUNCTION bulk_commit(
  p_batch uuid, p_token uuid, p_line integer, p_custom_id text, p_result text,
  p_release text, p_input_tokens integer, p_output_tokens integer, p_billable integer
) RETURNS text AS $$
  SELECT bulk_commit_records(p_batch, p_token, ARRAY[p_line], ARRAY[p_custom_id], ARRAY[p_result],
                             ARRAY[p_release], ARRAY[p_input_tokens], ARRAY[p_output_tokens], ARRAY[p_billable]);
$$ LANGUAGE sql;

CREATE FUNCTION bulk_claim(p_token uuid, p_lease_ms double precision, p_served text[], p_self text)
RETURNS SETOF bulk_claim_row AS $$
  SELECT * FROM bulk_claim_records(p_token, p_lease_ms, p_served, p_self, 1);
$$ LANGUAGE sql;

CREATE FUNCTION bulk_commit_and_claim(
  p_batch uuid, p_token uuid, p_line integer, p_custom_id text, p_result text,
  p_release text, p_input_tokens integer, p_output_tokens integer, p_billable integer,
  p_next_token uuid, p_lease_ms double precision, p_served text[], p_self text
) RETURNS SETOF bulk_claim_row AS $$
  SELECT bulk_commit(p_batch, p_token, p_line, p_custom_id, p_result, p_release, p_input_tokens, p_output_tokens, p_billable);
  SELECT * FROM bulk_claim(p_next_token, p_lease_ms, p_served, p_self);
$$ LANGUAGE sql;

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
  -- The current signing secret, and the previous one while it still signs after a rotation, each
  -- sealed under WEBHOOK_SECRET_KEY (server-shared/webhook-secrets.ts): `aesgcm1:<key id>:...`, never
  -- the whsec_... itself (rows of before are sealed by the sidecar, sidecar/webhook-sealing.ts).
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
