-- An account's settled image credit by when it was charged: GET /v1/usage (edge/routes/usage.ts)
-- sums the charges of a range of days beside the account's usage rows.

CREATE INDEX credit_reservations_settled ON credit_reservations (account_id, finished_at) WHERE status = 'settled';
