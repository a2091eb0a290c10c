-- Scheduler schema: wake-ups, schedules, pauses, webhooks and their replay window.
-- Firing claims due rows with FOR UPDATE SKIP LOCKED and keeps them locked until the
-- delivery is recorded, so replicas never fire one occurrence twice; messaging
-- deduplicates the per-occurrence idempotency key if a replica dies in between (S6).

CREATE TABLE wake_ups (
    id              uuid PRIMARY KEY,
    seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    conversation_id uuid NOT NULL,
    product         text NOT NULL DEFAULT '',
    note            text NOT NULL DEFAULT '',
    due_at          timestamptz NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'fired', 'cancelled', 'failed')),
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    fired_at        timestamptz,
    delivery_id     uuid,
    late_seconds    double precision,
    error           text
);

-- What the tick scans: pending wake-ups, earliest first.
CREATE INDEX wake_ups_due ON wake_ups (due_at) WHERE status = 'pending';
CREATE INDEX wake_ups_conversation ON wake_ups (conversation_id, seq);
CREATE INDEX wake_ups_product ON wake_ups (product, seq);
CREATE INDEX wake_ups_finished ON wake_ups (updated_at) WHERE status <> 'pending';

CREATE TABLE schedules (
    id               uuid PRIMARY KEY,
    seq              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name             text NOT NULL DEFAULT '',
    conversation_id  uuid NOT NULL,
    product          text NOT NULL DEFAULT '',
    prompt           text NOT NULL,
    cron             text,
    interval_seconds bigint CHECK (interval_seconds > 0),
    time_zone        text NOT NULL DEFAULT 'UTC',
    anchor_at        timestamptz NOT NULL,
    paused           boolean NOT NULL DEFAULT false,
    next_fire_at     timestamptz NOT NULL,
    last_fired_at    timestamptz,
    fire_count       bigint NOT NULL DEFAULT 0,
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    CHECK ((cron IS NULL) <> (interval_seconds IS NULL))
);

CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;
CREATE INDEX schedules_conversation ON schedules (conversation_id, seq);
CREATE INDEX schedules_created_by ON schedules (created_by, seq);

-- Global ('') and per-product pauses ('crew:demo', 'crew:*', ...) (S3).
CREATE TABLE pauses (
    product   text PRIMARY KEY,
    reason    text NOT NULL DEFAULT '',
    paused_by text NOT NULL,
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- One row. Firing transactions hold it FOR SHARE; Pause and Resume update it, so a
-- Pause waits for in-flight firings and every firing after it sees the pause.
CREATE TABLE pause_gate (
    id         smallint PRIMARY KEY CHECK (id = 1),
    changed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO pause_gate (id) VALUES (1);

-- The secret is not stored: it is HMAC(webhook key, id + salt), so a copy of the
-- database alone does not reveal it (docs/scheduler.md).
CREATE TABLE webhooks (
    id                 uuid PRIMARY KEY,
    seq                bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    name               text NOT NULL DEFAULT '',
    conversation_id    uuid NOT NULL,
    product            text NOT NULL DEFAULT '',
    salt               text NOT NULL,
    secret_fingerprint text NOT NULL,
    created_by         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    secret_rotated_at  timestamptz
);

CREATE INDEX webhooks_conversation ON webhooks (conversation_id, seq);
CREATE INDEX webhooks_created_by ON webhooks (created_by, seq);

-- Events received, for the replay window: a delivery id or a signature seen again is
-- a replay. Rows older than the window are purged.
CREATE TABLE webhook_receipts (
    webhook_id   uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    delivery_key text NOT NULL,
    signature    text NOT NULL,
    body_sha256  text NOT NULL,
    delivery_id  uuid,                 -- set in the same transaction, after messaging accepted it
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (webhook_id, delivery_key),
    UNIQUE (webhook_id, signature)
);

CREATE INDEX webhook_receipts_received_at ON webhook_receipts (received_at);
