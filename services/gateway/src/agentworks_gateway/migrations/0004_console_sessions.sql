-- Web console sessions (V3): the cookie carries a random session id, only its SHA-256 is
-- stored. A session acts as its API token: every request joins the token, so a revoked
-- or expired token ends its sessions at once, on every replica.
CREATE TABLE console_sessions (
    session_hash text PRIMARY KEY,
    token_id     text NOT NULL REFERENCES api_tokens (token_id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);
