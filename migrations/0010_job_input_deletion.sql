-- A job's input file deleted ahead of its data: a cancelled, failed or expired batch's input is
-- read no more, so cleanup deletes it at its next run and records when (server-shared/jobs/store.ts
-- `dueInputDeletion`); its results stay for the data period. Both job tables have the job store's columns.

ALTER TABLE batches ADD COLUMN input_deleted_at timestamptz;
ALTER TABLE trainings ADD COLUMN input_deleted_at timestamptz;
