-- A2A outbound (X4): the external agents' tasks a turn started, followed until they end
-- so that their replies and ends come back as turns even across a gateway restart.
-- `conversation_id` is the turn's conversation the deliveries go to; `delivered` the
-- external message ids already put there (each also under its own idempotency key);
-- `leased_by`/`lease_until` the one replica following it now.
CREATE TABLE a2a_out_tasks (
    agent           text NOT NULL,
    task_id         text NOT NULL,
    kind            text NOT NULL,
    skill           text NOT NULL DEFAULT '',
    conversation_id text NOT NULL,
    target          text NOT NULL,
    context_id      text NOT NULL DEFAULT '',
    state           text NOT NULL DEFAULT '',
    delivered       text[] NOT NULL DEFAULT '{}',
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz,
    leased_by       text,
    lease_until     timestamptz,
    PRIMARY KEY (agent, task_id)
);
CREATE INDEX a2a_out_tasks_open ON a2a_out_tasks (updated_at) WHERE done_at IS NULL;
