-- V1: runtimes are listed with their credentials and when each was last seen (its last
-- exchange for an identity), oldest first by keyset on (created_at, token_id).
ALTER TABLE api_tokens ADD COLUMN last_seen_at timestamptz;
CREATE INDEX api_tokens_runtime_listed ON api_tokens (created_at, token_id)
    WHERE targets IS NOT NULL;
