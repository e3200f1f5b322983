-- Image assets (issue 27): the image vertical's uploaded photos and their canonical PNGs.

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
