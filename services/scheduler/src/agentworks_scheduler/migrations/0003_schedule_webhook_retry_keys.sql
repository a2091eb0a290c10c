-- CreateSchedule and CreateWebhook retry keys, as 0002 gave CreateWakeUp: a client
-- retrying after a lost answer gets the same schedule or webhook.
ALTER TABLE schedules ADD COLUMN submission_id text, ADD COLUMN request_hash text;
CREATE UNIQUE INDEX schedules_submission ON schedules (created_by, submission_id)
    WHERE submission_id IS NOT NULL;
ALTER TABLE webhooks ADD COLUMN submission_id text, ADD COLUMN request_hash text;
CREATE UNIQUE INDEX webhooks_submission ON webhooks (created_by, submission_id)
    WHERE submission_id IS NOT NULL;
