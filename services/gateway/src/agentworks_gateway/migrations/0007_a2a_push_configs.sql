-- A2A push-notification configs (X2, N2): a caller's config on one of its calls' tasks is
-- a webhooks-out endpoint of kind 'a2a_push' (its URL, its signing secret, the extra
-- headers each attempt carries), so its pushes ride webhooks out's deliveries: one
-- queue, the same lease, retries, backoff and signing. The endpoints tool shows only
-- kind 'webhook'.
ALTER TABLE webhook_endpoints ADD COLUMN kind text NOT NULL DEFAULT 'webhook';
ALTER TABLE webhook_endpoints ADD COLUMN headers jsonb NOT NULL DEFAULT '{}';
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_kind_check
    CHECK (kind IN ('webhook', 'a2a_push'));

-- One row per config: the task (`call_id`) and its A2A id, whose it is, what Get and
-- List read back (`token`, the authentication scheme; never the credentials), and its
-- follower: the one replica following the call now (`leased_by`/`lease_until`), the
-- last state pushed (`last_state`, written with that state's delivery), `done_at` once
-- the end is stored.
CREATE TABLE a2a_push_configs (
    endpoint_id text PRIMARY KEY REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
    call_id     text NOT NULL,
    config_id   text NOT NULL,
    principal   text NOT NULL,
    token       text NOT NULL DEFAULT '',
    auth_scheme text NOT NULL DEFAULT '',
    last_state  text NOT NULL DEFAULT '',
    last_error  text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz,
    leased_by   text,
    lease_until timestamptz,
    CONSTRAINT a2a_push_configs_task_id UNIQUE (call_id, config_id)
);
CREATE INDEX a2a_push_configs_open ON a2a_push_configs (lease_until) WHERE done_at IS NULL;
