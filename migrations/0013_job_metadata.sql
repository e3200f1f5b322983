-- A job's metadata: the caller's string pairs given at create (contract/jobs.ts JobMetadata),
-- returned everywhere the job is; the service reads nothing in them.

ALTER TABLE batches ADD COLUMN metadata jsonb CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
ALTER TABLE trainings ADD COLUMN metadata jsonb CHECK (metadata IS NULL OR jsonb_typeof(metadata) = 'object');
