-- The gateway schema as its migrations build it (agentworks.server.schema).

CREATE TABLE a2a_out_tasks (
    agent text NOT NULL,
    task_id text NOT NULL,
    kind text NOT NULL,
    skill text DEFAULT ''::text NOT NULL,
    conversation_id text NOT NULL,
    target text NOT NULL,
    context_id text DEFAULT ''::text NOT NULL,
    state text DEFAULT ''::text NOT NULL,
    delivered text[] DEFAULT '{}'::text[] NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    leased_by text,
    lease_until timestamp with time zone,
    CONSTRAINT a2a_out_tasks_pkey PRIMARY KEY (agent, task_id)
);

CREATE TABLE a2a_push_configs (
    endpoint_id text NOT NULL,
    call_id text NOT NULL,
    config_id text NOT NULL,
    principal text NOT NULL,
    token text DEFAULT ''::text NOT NULL,
    auth_scheme text DEFAULT ''::text NOT NULL,
    last_state text DEFAULT ''::text NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    leased_by text,
    lease_until timestamp with time zone,
    CONSTRAINT a2a_push_configs_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints(endpoint_id) ON DELETE CASCADE,
    CONSTRAINT a2a_push_configs_pkey PRIMARY KEY (endpoint_id),
    CONSTRAINT a2a_push_configs_task_id UNIQUE (call_id, config_id)
);

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

CREATE TABLE webhook_deliveries (
    delivery_id text NOT NULL,
    endpoint_id text NOT NULL,
    event_type text NOT NULL,
    event_key text NOT NULL,
    payload bytea NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    give_up_at timestamp with time zone NOT NULL,
    last_attempt_at timestamp with time zone,
    last_error text DEFAULT ''::text NOT NULL,
    last_status integer,
    delivered_at timestamp with time zone,
    leased_by text,
    CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints(endpoint_id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (delivery_id),
    CONSTRAINT webhook_deliveries_status_check CHECK (status = ANY (ARRAY['pending'::text, 'delivered'::text, 'failing'::text, 'gave_up'::text]))
);

CREATE TABLE webhook_endpoints (
    endpoint_id text NOT NULL,
    principal text NOT NULL,
    url text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    secret text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    secret_rotated_at timestamp with time zone,
    kind text DEFAULT 'webhook'::text NOT NULL,
    headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT webhook_endpoints_kind_check CHECK (kind = ANY (ARRAY['webhook'::text, 'a2a_push'::text])),
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (endpoint_id)
);

CREATE TABLE webhook_feeds (
    endpoint_id text NOT NULL,
    source text NOT NULL,
    cursor text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    leased_by text,
    lease_until timestamp with time zone,
    last_error text DEFAULT ''::text NOT NULL,
    CONSTRAINT webhook_feeds_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints(endpoint_id) ON DELETE CASCADE,
    CONSTRAINT webhook_feeds_pkey PRIMARY KEY (endpoint_id, source)
);

CREATE INDEX a2a_out_tasks_open ON gateway.a2a_out_tasks USING btree (updated_at) WHERE (done_at IS NULL);

CREATE INDEX a2a_push_configs_done ON gateway.a2a_push_configs USING btree (done_at) WHERE (done_at IS NOT NULL);

CREATE INDEX a2a_push_configs_open ON gateway.a2a_push_configs USING btree (lease_until) WHERE (done_at IS NULL);

CREATE INDEX api_tokens_runtime_listed ON gateway.api_tokens USING btree (created_at, token_id) WHERE (targets IS NOT NULL);

CREATE INDEX console_sessions_expires_at ON gateway.console_sessions USING btree (expires_at);

CREATE INDEX webhook_deliveries_due ON gateway.webhook_deliveries USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['pending'::text, 'failing'::text]));

CREATE INDEX webhook_deliveries_finished ON gateway.webhook_deliveries USING btree (COALESCE(delivered_at, last_attempt_at, created_at)) WHERE (status = ANY (ARRAY['delivered'::text, 'gave_up'::text]));

CREATE INDEX webhook_deliveries_listed ON gateway.webhook_deliveries USING btree (endpoint_id, created_at, delivery_id);

CREATE INDEX webhook_endpoints_principal ON gateway.webhook_endpoints USING btree (principal, created_at);
