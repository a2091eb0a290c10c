-- API tokens (A1): only the SHA-256 hex digest of each token is stored.
CREATE TABLE api_tokens (
    token_id    text PRIMARY KEY,
    label       text NOT NULL DEFAULT '',
    principal   text NOT NULL,
    roles       text[] NOT NULL DEFAULT '{}',
    token_hash  text NOT NULL UNIQUE,
    created_by  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    revoked_by  text
);
