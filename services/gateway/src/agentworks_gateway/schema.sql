-- The gateway schema as its migrations build it (agentworks.server.schema).

CREATE TABLE api_tokens (
    token_id text NOT NULL,
    label text DEFAULT ''::text NOT NULL,
    principal text NOT NULL,
    roles text[] DEFAULT '{}'::text[] NOT NULL,
    token_hash text NOT NULL,
    created_by text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    revoked_by text,
    targets text[],
    expires_at timestamp with time zone,
    last_seen_at timestamp with time zone,
    CONSTRAINT api_tokens_pkey PRIMARY KEY (token_id),
    CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash)
);

CREATE TABLE console_sessions (
    session_hash text NOT NULL,
    token_id text NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT console_sessions_pkey PRIMARY KEY (session_hash),
    CONSTRAINT console_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES api_tokens(token_id) ON DELETE CASCADE
);

CREATE INDEX api_tokens_runtime_listed ON gateway.api_tokens USING btree (created_at, token_id) WHERE (targets IS NOT NULL);

CREATE INDEX console_sessions_expires_at ON gateway.console_sessions USING btree (expires_at);
