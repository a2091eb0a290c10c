-- A runtime whose ask timed out withdraws its question (AskInputRequest.withdraw): the
-- status stops showing it, a reply cannot answer it, and a new question can be asked.
ALTER TABLE questions ADD COLUMN withdrawn_at timestamptz;
