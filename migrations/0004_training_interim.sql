-- The held-out figures of a training while its examples are read (contract/trainings.ts
-- InterimEvaluation), shown in its progress.

ALTER TABLE trainings ADD COLUMN interim jsonb;
