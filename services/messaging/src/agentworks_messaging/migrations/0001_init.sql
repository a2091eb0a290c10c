-- Messaging schema: targets, conversations, inboxes, messages, the turn queue.
-- Positions are per conversation and assigned under the conversation's row lock, so
-- commit order equals position order and a cursor never skips a late commit.

CREATE TABLE targets (
    kind          text NOT NULL CHECK (kind IN ('crew', 'workflow')),
    name          text NOT NULL,
    owner         text NOT NULL,
    free_text_ask boolean,                      -- NULL: never set, which means on (C1)
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
);

CREATE TABLE conversations (
    id                 uuid PRIMARY KEY,
    target_kind        text NOT NULL,
    target_name        text NOT NULL,
    started_by         text NOT NULL,
    last_position      bigint NOT NULL DEFAULT 0,
    pending_deliveries integer NOT NULL DEFAULT 0,
    oldest_pending_at  timestamptz,
    active_turn_id     uuid,
    created_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (target_kind, target_name) REFERENCES targets (kind, name)
);

-- Conversations with work waiting and no turn running, oldest first: what ClaimTurn scans.
CREATE INDEX conversations_claimable
    ON conversations (target_kind, target_name, oldest_pending_at)
    WHERE pending_deliveries > 0 AND active_turn_id IS NULL;

CREATE TABLE inboxes (
    id              uuid PRIMARY KEY,
    conversation_id uuid NOT NULL UNIQUE REFERENCES conversations (id),
    principal       text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE messages (
    id              uuid PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES conversations (id),
    position        bigint NOT NULL,
    inbox_id        uuid NOT NULL REFERENCES inboxes (id),
    direction       text NOT NULL CHECK (direction IN ('to_target', 'to_inbox')),
    sender          text NOT NULL,
    channel         text NOT NULL,
    text            text NOT NULL,
    parts           jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, position)
);

CREATE INDEX messages_inbox_read ON messages (inbox_id, position) WHERE direction = 'to_inbox';

CREATE TABLE submissions (
    principal       text NOT NULL,
    submission_id   text NOT NULL,
    request_hash    text NOT NULL,
    message_id      uuid NOT NULL,
    conversation_id uuid NOT NULL,
    inbox_id        uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, submission_id)
);

CREATE INDEX submissions_created_at ON submissions (created_at);

CREATE TABLE turns (
    id               uuid PRIMARY KEY,
    conversation_id  uuid NOT NULL REFERENCES conversations (id),
    runtime          text NOT NULL,
    status           text NOT NULL CHECK (status IN ('active', 'completed', 'interrupted')),
    lease_expires_at timestamptz NOT NULL,
    claimed_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz
);

-- One turn per conversation at a time (C10), enforced by the database itself.
CREATE UNIQUE INDEX turns_one_active ON turns (conversation_id) WHERE status = 'active';
CREATE INDEX turns_active_lease ON turns (lease_expires_at) WHERE status = 'active';

CREATE TABLE deliveries (
    id              uuid PRIMARY KEY,
    conversation_id uuid NOT NULL REFERENCES conversations (id),
    position        bigint NOT NULL,
    kind            text NOT NULL
        CHECK (kind IN ('message', 'wake_up', 'schedule', 'webhook', 'function_completed')),
    message_id      uuid REFERENCES messages (id),
    text            text NOT NULL DEFAULT '',
    payload         bytea,
    attributes      jsonb,
    idempotency_key text UNIQUE,
    status          text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'in_turn', 'handled', 'interrupted')),
    turn_id         uuid REFERENCES turns (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (conversation_id, position)
);

CREATE INDEX deliveries_pending ON deliveries (conversation_id) WHERE status = 'pending';
CREATE INDEX deliveries_turn ON deliveries (turn_id);
