-- A training may be asked, at create, to train again without the examples whose labels its audit
-- suspects, keeping whichever candidate the acceptance rule prefers.

ALTER TABLE trainings ADD COLUMN exclude_suspected_labels boolean NOT NULL DEFAULT false;
