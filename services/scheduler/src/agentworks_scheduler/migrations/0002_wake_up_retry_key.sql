-- CreateWakeUp retry keys: a client retrying after a lost answer gets the same wake-up.
ALTER TABLE wake_ups ADD COLUMN submission_id text, ADD COLUMN request_hash text;
CREATE UNIQUE INDEX wake_ups_submission ON wake_ups (created_by, submission_id)
    WHERE submission_id IS NOT NULL;
