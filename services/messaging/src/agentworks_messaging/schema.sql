-- The messaging schema as its migrations build it (agentworks.server.schema).

CREATE TABLE conversations (
    id uuid NOT NULL,
    target_kind text NOT NULL,
    target_name text NOT NULL,
    started_by text NOT NULL,
    last_position bigint DEFAULT 0 NOT NULL,
    pending_deliveries integer DEFAULT 0 NOT NULL,
    oldest_pending_at timestamp with time zone,
    active_turn_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    origin_conversation_id uuid,
    origin_target_kind text,
    origin_target_name text,
    turn_at timestamp with time zone,
    CONSTRAINT conversations_check CHECK ((origin_conversation_id IS NULL) = (origin_target_kind IS NULL) AND (origin_target_kind IS NULL) = (origin_target_name IS NULL)),
    CONSTRAINT conversations_origin_conversation_id_fkey FOREIGN KEY (origin_conversation_id) REFERENCES conversations(id),
    CONSTRAINT conversations_origin_target_kind_origin_target_name_fkey FOREIGN KEY (origin_target_kind, origin_target_name) REFERENCES targets(kind, name),
    CONSTRAINT conversations_pkey PRIMARY KEY (id),
    CONSTRAINT conversations_target_kind_target_name_fkey FOREIGN KEY (target_kind, target_name) REFERENCES targets(kind, name)
);

CREATE TABLE deliveries (
    id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    position bigint NOT NULL,
    kind text NOT NULL,
    message_id uuid,
    text text DEFAULT ''::text NOT NULL,
    payload bytea,
    attributes jsonb,
    idempotency_key text,
    status text DEFAULT 'pending'::text NOT NULL,
    turn_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    traceparent text DEFAULT ''::text NOT NULL,
    CONSTRAINT deliveries_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations(id),
    CONSTRAINT deliveries_conversation_id_position_key UNIQUE (conversation_id, "position"),
    CONSTRAINT deliveries_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT deliveries_kind_check CHECK (kind = ANY (ARRAY['message'::text, 'wake_up'::text, 'schedule'::text, 'webhook'::text, 'function_completed'::text, 'conversation_reply'::text])),
    CONSTRAINT deliveries_message_id_fkey FOREIGN KEY (message_id) REFERENCES messages(id),
    CONSTRAINT deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT deliveries_status_check CHECK (status = ANY (ARRAY['pending'::text, 'in_turn'::text, 'handled'::text, 'interrupted'::text])),
    CONSTRAINT deliveries_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES turns(id)
);

CREATE TABLE inboxes (
    id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    principal text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT inboxes_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations(id),
    CONSTRAINT inboxes_conversation_id_key UNIQUE (conversation_id),
    CONSTRAINT inboxes_pkey PRIMARY KEY (id)
);

CREATE TABLE messages (
    id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    position bigint NOT NULL,
    inbox_id uuid NOT NULL,
    direction text NOT NULL,
    sender text NOT NULL,
    channel text NOT NULL,
    text text NOT NULL,
    parts jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT messages_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations(id),
    CONSTRAINT messages_conversation_id_position_key UNIQUE (conversation_id, "position"),
    CONSTRAINT messages_direction_check CHECK (direction = ANY (ARRAY['to_target'::text, 'to_inbox'::text])),
    CONSTRAINT messages_inbox_id_fkey FOREIGN KEY (inbox_id) REFERENCES inboxes(id),
    CONSTRAINT messages_pkey PRIMARY KEY (id)
);

CREATE TABLE submissions (
    principal text NOT NULL,
    submission_id text NOT NULL,
    request_hash text NOT NULL,
    message_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    inbox_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT submissions_pkey PRIMARY KEY (principal, submission_id)
);

CREATE TABLE targets (
    kind text NOT NULL,
    name text NOT NULL,
    owner text NOT NULL,
    free_text_ask boolean,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    a2a_card boolean,
    CONSTRAINT targets_kind_check CHECK (kind = ANY (ARRAY['crew'::text, 'workflow'::text])),
    CONSTRAINT targets_pkey PRIMARY KEY (kind, name)
);

CREATE TABLE turns (
    id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    runtime text NOT NULL,
    status text NOT NULL,
    lease_expires_at timestamp with time zone NOT NULL,
    claimed_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    error text DEFAULT ''::text NOT NULL,
    CONSTRAINT turns_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES conversations(id),
    CONSTRAINT turns_pkey PRIMARY KEY (id),
    CONSTRAINT turns_status_check CHECK (status = ANY (ARRAY['active'::text, 'completed'::text, 'interrupted'::text]))
);

CREATE INDEX conversations_claimable ON messaging.conversations USING btree (target_kind, target_name, turn_at, oldest_pending_at) WHERE ((pending_deliveries > 0) AND (active_turn_id IS NULL));

CREATE INDEX conversations_claimable_by_caller ON messaging.conversations USING btree (target_kind, target_name, started_by, turn_at) WHERE ((pending_deliveries > 0) AND (active_turn_id IS NULL));

CREATE INDEX conversations_listed ON messaging.conversations USING btree (created_at, id);

CREATE INDEX conversations_listed_by_target ON messaging.conversations USING btree (target_kind, target_name, created_at, id);

CREATE INDEX deliveries_pending ON messaging.deliveries USING btree (conversation_id) WHERE (status = 'pending'::text);

CREATE INDEX deliveries_turn ON messaging.deliveries USING btree (turn_id);

CREATE INDEX inboxes_by_principal ON messaging.inboxes USING btree (principal);

CREATE INDEX messages_by_time ON messaging.messages USING btree (conversation_id, created_at);

CREATE INDEX messages_inbox_read ON messaging.messages USING btree (inbox_id, "position") WHERE (direction = 'to_inbox'::text);

CREATE INDEX submissions_created_at ON messaging.submissions USING btree (created_at);

CREATE INDEX targets_by_owner ON messaging.targets USING btree (owner);

CREATE INDEX turns_active_lease ON messaging.turns USING btree (lease_expires_at) WHERE (status = 'active'::text);

CREATE UNIQUE INDEX turns_one_active ON messaging.turns USING btree (conversation_id) WHERE (status = 'active'::text);

CREATE OR REPLACE FUNCTION messaging.queue_turn()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.pending_deliveries > 0 AND NEW.active_turn_id IS NULL
       AND (TG_OP = 'INSERT'
            OR NOT (OLD.pending_deliveries > 0 AND OLD.active_turn_id IS NULL)) THEN
        -- NEW is not among the queued rows here (before the change it was not queued).
        NEW.turn_at := greatest(
            coalesce(
                (SELECT min(c.turn_at) FROM messaging.conversations c
                 WHERE c.target_kind = NEW.target_kind AND c.target_name = NEW.target_name
                   AND c.pending_deliveries > 0 AND c.active_turn_id IS NULL),
                now()),
            (SELECT max(c.turn_at) + interval '1 second' FROM messaging.conversations c
             WHERE c.target_kind = NEW.target_kind AND c.target_name = NEW.target_name
               AND c.started_by = NEW.started_by
               AND c.pending_deliveries > 0 AND c.active_turn_id IS NULL));
    END IF;
    RETURN NEW;
END
$function$;

CREATE TRIGGER conversations_queue_turn BEFORE INSERT OR UPDATE OF pending_deliveries, active_turn_id ON conversations FOR EACH ROW EXECUTE FUNCTION queue_turn();
