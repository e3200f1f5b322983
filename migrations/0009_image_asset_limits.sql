-- An account's image assets, by creation: the per-account limits (stored assets, assets created per
-- minute, completions at once: server-shared/images.ts) count them under the account's lock.

CREATE INDEX image_assets_by_account ON image_assets (account_id, created_at);
