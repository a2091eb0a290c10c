-- Functions schema: targets, declarations, calls (each with its one execution), the
-- execution record (messages, events, workflow steps, questions, files), blobs, and the
-- completion-notice outbox.
--
-- The running limit (F5) is enforced by locking the target row and counting its open
-- calls in the same transaction; dedup (F6) by a unique key on (caller, submission_key).
-- Per-call indexes (messages, events, steps) are assigned under the call's row lock.

CREATE TABLE targets (
    kind          text NOT NULL CHECK (kind IN ('crew', 'workflow')),
    name          text NOT NULL,
    owner         text NOT NULL,
    running_limit integer NOT NULL DEFAULT 0 CHECK (running_limit >= 0),  -- 0: service default
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);

CREATE TABLE functions (
    target_kind     text NOT NULL,
    target_name     text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    input_schema    jsonb NOT NULL,
    output_schema   jsonb,
    allowed_callers text[] NOT NULL DEFAULT '{}',
    starts_work     boolean NOT NULL DEFAULT false,
    workflow        jsonb,                       -- route, allowed_groups, variables
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (target_kind, target_name, name),
    FOREIGN KEY (target_kind, target_name) REFERENCES targets (kind, name)
);

CREATE TABLE calls (
    id                     uuid PRIMARY KEY,
    target_kind            text NOT NULL,
    target_name            text NOT NULL,
    function               text NOT NULL,
    caller                 text NOT NULL,
    inputs                 jsonb NOT NULL,
    -- Snapshots of the declaration at call time: a later update changes no open call.
    description            text NOT NULL DEFAULT '',
    output_schema          jsonb,
    starts_work            boolean NOT NULL DEFAULT false,
    workflow               jsonb,
    variables              jsonb,
    run_id                 uuid,
    source                 jsonb,
    submission_key         text,
    request_hash           text NOT NULL,
    notify_conversation_id uuid,
    status                 text NOT NULL DEFAULT 'running' CHECK (status IN
        ('running', 'waiting_for_input', 'completed', 'failed', 'interrupted', 'cancelled')),
    progress               text NOT NULL DEFAULT '',
    runtime                text,                 -- principal that claimed the execution
    claimed_at             timestamptz,
    lease_expires_at       timestamptz,
    message_count          bigint NOT NULL DEFAULT 0,
    event_count            bigint NOT NULL DEFAULT 0,
    step_count             bigint NOT NULL DEFAULT 0,
    question_count         integer NOT NULL DEFAULT 0,
    last_report_seq        bigint NOT NULL DEFAULT 0,
    correction_turns       integer NOT NULL DEFAULT 0,
    correction_prompt      text,
    answer                 text NOT NULL DEFAULT '',
    has_result             boolean NOT NULL DEFAULT false,
    result                 jsonb,
    error                  text NOT NULL DEFAULT '',
    version                bigint NOT NULL DEFAULT 0,  -- bumped on every change (status long-poll)
    created_at             timestamptz NOT NULL DEFAULT now(),
    ended_at               timestamptz,
    FOREIGN KEY (target_kind, target_name) REFERENCES targets (kind, name)
);

-- F6: one call per caller and retry key, whatever its state.
CREATE UNIQUE INDEX calls_submission ON calls (caller, submission_key)
    WHERE submission_key IS NOT NULL;
-- F5: the open calls of a target, counted under the target's row lock.
CREATE INDEX calls_open ON calls (target_kind, target_name)
    WHERE status IN ('running', 'waiting_for_input');
-- What ClaimExecution scans, oldest first.
CREATE INDEX calls_claimable ON calls (target_kind, target_name, created_at)
    WHERE status = 'running' AND runtime IS NULL;
-- What the sweeper scans (F12).
CREATE INDEX calls_leased ON calls (lease_expires_at)
    WHERE runtime IS NOT NULL AND status IN ('running', 'waiting_for_input');

CREATE TABLE execution_messages (
    call_id    uuid NOT NULL REFERENCES calls (id),
    index      bigint NOT NULL,
    role       text NOT NULL,
    text       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (call_id, index)
);

-- The bounded conversation view: tool events keep the tool name only, never raw data.
CREATE TABLE execution_events (
    call_id    uuid NOT NULL REFERENCES calls (id),
    index      bigint NOT NULL,
    kind       text NOT NULL,
    text       text NOT NULL DEFAULT '',
    tool_name  text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (call_id, index)
);

-- F14: a workflow function's run record is the call's run_id plus this step history.
CREATE TABLE workflow_steps (
    call_id    uuid NOT NULL REFERENCES calls (id),
    index      bigint NOT NULL,
    step       text NOT NULL,
    group_name text NOT NULL DEFAULT '',
    status     text NOT NULL,
    detail     text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (call_id, index)
);

-- F11: human-input questions, one open at a time per call.
CREATE TABLE questions (
    call_id     uuid NOT NULL REFERENCES calls (id),
    ask_id      text NOT NULL,
    seq         integer NOT NULL,
    question    text NOT NULL,
    reply       text,
    answered_by text,
    asked_at    timestamptz NOT NULL DEFAULT now(),
    answered_at timestamptz,
    PRIMARY KEY (call_id, ask_id),
    UNIQUE (call_id, seq)
);

-- Blobs: file bytes in fixed-size chunks. A blob is written chunk by chunk while it
-- streams in and becomes visible only when a files row points at it.
CREATE TABLE blobs (
    id         uuid PRIMARY KEY,
    size       bigint NOT NULL DEFAULT 0,
    sha256     text,
    complete   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE NOT complete;

CREATE TABLE blob_chunks (
    blob_id uuid NOT NULL REFERENCES blobs (id) ON DELETE CASCADE,
    seq     integer NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (blob_id, seq)
);

CREATE TABLE files (
    call_id    uuid NOT NULL REFERENCES calls (id),
    name       text NOT NULL,
    blob_id    uuid NOT NULL REFERENCES blobs (id),
    size       bigint NOT NULL,
    media_type text NOT NULL DEFAULT 'application/octet-stream',
    sha256     text NOT NULL,
    is_text    boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (call_id, name)
);

-- F13 outbox: written in the transaction that ends the call, delivered by a background
-- task with the idempotency key call:<call_id>:done, so a crash between the two still
-- delivers exactly once.
CREATE TABLE notices (
    call_id         uuid PRIMARY KEY REFERENCES calls (id),
    conversation_id uuid NOT NULL,
    text            text NOT NULL,
    attributes      jsonb NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    failed_at       timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX notices_due ON notices (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
