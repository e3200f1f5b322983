-- Keys created for less than everything (contract/keys.ts): an expiry, a scope of routes, the model
-- names they may use. Existing keys have none of these and keep doing what their account can.

ALTER TABLE api_keys
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN scope text CHECK (scope IN ('decisions', 'decisions_and_batches')),
  ADD COLUMN models text[] CHECK (models IS NULL OR cardinality(models) BETWEEN 1 AND 16);
