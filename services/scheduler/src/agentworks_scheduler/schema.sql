-- The scheduler schema as its migrations build it (agentworks.server.schema).

CREATE SEQUENCE schedules_seq_seq AS bigint INCREMENT 1 START 1;

CREATE SEQUENCE wake_ups_seq_seq AS bigint INCREMENT 1 START 1;

CREATE SEQUENCE webhooks_seq_seq AS bigint INCREMENT 1 START 1;

CREATE TABLE pause_gate (
    id smallint NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT pause_gate_id_check CHECK (id = 1),
    CONSTRAINT pause_gate_pkey PRIMARY KEY (id)
);

CREATE TABLE pauses (
    product text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    paused_by text NOT NULL,
    paused_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT pauses_pkey PRIMARY KEY (product)
);

CREATE TABLE schedules (
    id uuid NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    conversation_id uuid NOT NULL,
    product text DEFAULT ''::text NOT NULL,
    prompt text NOT NULL,
    cron text,
    interval_seconds bigint,
    time_zone text DEFAULT 'UTC'::text NOT NULL,
    anchor_at timestamp with time zone NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    next_fire_at timestamp with time zone NOT NULL,
    last_fired_at timestamp with time zone,
    fire_count bigint DEFAULT 0 NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    submission_id text,
    request_hash text,
    CONSTRAINT schedules_check CHECK ((cron IS NULL) <> (interval_seconds IS NULL)),
    CONSTRAINT schedules_interval_seconds_check CHECK (interval_seconds > 0),
    CONSTRAINT schedules_pkey PRIMARY KEY (id),
    CONSTRAINT schedules_seq_key UNIQUE (seq)
);

CREATE TABLE wake_ups (
    id uuid NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    conversation_id uuid NOT NULL,
    product text DEFAULT ''::text NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    due_at timestamp with time zone NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    fired_at timestamp with time zone,
    delivery_id uuid,
    late_seconds double precision,
    error text,
    submission_id text,
    request_hash text,
    CONSTRAINT wake_ups_pkey PRIMARY KEY (id),
    CONSTRAINT wake_ups_seq_key UNIQUE (seq),
    CONSTRAINT wake_ups_status_check CHECK (status = ANY (ARRAY['pending'::text, 'fired'::text, 'cancelled'::text, 'failed'::text]))
);

CREATE TABLE webhook_receipts (
    webhook_id uuid NOT NULL,
    delivery_key text NOT NULL,
    signature text NOT NULL,
    body_sha256 text NOT NULL,
    delivery_id uuid,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_receipts_pkey PRIMARY KEY (webhook_id, delivery_key),
    CONSTRAINT webhook_receipts_webhook_id_fkey FOREIGN KEY (webhook_id) REFERENCES webhooks(id) ON DELETE CASCADE,
    CONSTRAINT webhook_receipts_webhook_id_signature_key UNIQUE (webhook_id, signature)
);

CREATE TABLE webhooks (
    id uuid NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    conversation_id uuid NOT NULL,
    product text DEFAULT ''::text NOT NULL,
    salt text NOT NULL,
    secret_fingerprint text NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    secret_rotated_at timestamp with time zone,
    submission_id text,
    request_hash text,
    CONSTRAINT webhooks_pkey PRIMARY KEY (id),
    CONSTRAINT webhooks_seq_key UNIQUE (seq)
);

CREATE INDEX schedules_conversation ON scheduler.schedules USING btree (conversation_id, seq);

CREATE INDEX schedules_created_by ON scheduler.schedules USING btree (created_by, seq);

CREATE INDEX schedules_due ON scheduler.schedules USING btree (next_fire_at) WHERE (NOT paused);

CREATE UNIQUE INDEX schedules_submission ON scheduler.schedules USING btree (created_by, submission_id) WHERE (submission_id IS NOT NULL);

CREATE INDEX wake_ups_conversation ON scheduler.wake_ups USING btree (conversation_id, seq);

CREATE INDEX wake_ups_due ON scheduler.wake_ups USING btree (due_at) WHERE (status = 'pending'::text);

CREATE INDEX wake_ups_finished ON scheduler.wake_ups USING btree (updated_at) WHERE (status <> 'pending'::text);

CREATE INDEX wake_ups_product ON scheduler.wake_ups USING btree (product, seq);

CREATE UNIQUE INDEX wake_ups_submission ON scheduler.wake_ups USING btree (created_by, submission_id) WHERE (submission_id IS NOT NULL);

CREATE INDEX webhook_receipts_received_at ON scheduler.webhook_receipts USING btree (received_at);

CREATE INDEX webhooks_conversation ON scheduler.webhooks USING btree (conversation_id, seq);

CREATE INDEX webhooks_created_by ON scheduler.webhooks USING btree (created_by, seq);

CREATE UNIQUE INDEX webhooks_submission ON scheduler.webhooks USING btree (created_by, submission_id) WHERE (submission_id IS NOT NULL);
