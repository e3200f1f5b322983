-- Image credit (issue 28): prepaid credit for image decisions, reserved before prediction, settled
-- once on success and released on failure.

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

-- The operator's ledger of credit granted (`npm run account -- credit`); each grant adds to the
-- balance in the same statement.
CREATE TABLE credit_grants (
  id                bigserial PRIMARY KEY,
  account_id        uuid NOT NULL REFERENCES accounts (id),
  amount_micro_usd  bigint NOT NULL CHECK (amount_micro_usd > 0),
  note              text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);
