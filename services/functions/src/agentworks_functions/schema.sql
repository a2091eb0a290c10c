-- The functions schema as its migrations build it (agentworks.server.schema).

CREATE TABLE blob_chunks (
    blob_id uuid NOT NULL,
    seq integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT blob_chunks_blob_id_fkey FOREIGN KEY (blob_id) REFERENCES blobs(id) ON DELETE CASCADE,
    CONSTRAINT blob_chunks_pkey PRIMARY KEY (blob_id, seq)
);

CREATE TABLE blobs (
    id uuid NOT NULL,
    size bigint DEFAULT 0 NOT NULL,
    sha256 text,
    complete boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT blobs_pkey PRIMARY KEY (id)
);

CREATE TABLE caller_ends (
    caller text NOT NULL,
    last_end bigint NOT NULL,
    CONSTRAINT caller_ends_pkey PRIMARY KEY (caller)
);

CREATE TABLE calls (
    id uuid NOT NULL,
    target_kind text NOT NULL,
    target_name text NOT NULL,
    function text NOT NULL,
    caller text NOT NULL,
    inputs jsonb NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    output_schema jsonb,
    starts_work boolean DEFAULT false NOT NULL,
    workflow jsonb,
    variables jsonb,
    run_id uuid,
    source jsonb,
    submission_key text,
    request_hash text NOT NULL,
    notify_conversation_id uuid,
    status text DEFAULT 'running'::text NOT NULL,
    progress text DEFAULT ''::text NOT NULL,
    runtime text,
    claimed_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    message_count bigint DEFAULT 0 NOT NULL,
    event_count bigint DEFAULT 0 NOT NULL,
    step_count bigint DEFAULT 0 NOT NULL,
    question_count integer DEFAULT 0 NOT NULL,
    last_report_seq bigint DEFAULT 0 NOT NULL,
    correction_turns integer DEFAULT 0 NOT NULL,
    correction_prompt text,
    answer text DEFAULT ''::text NOT NULL,
    has_result boolean DEFAULT false NOT NULL,
    result jsonb,
    error text DEFAULT ''::text NOT NULL,
    version bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    traceparent text DEFAULT ''::text NOT NULL,
    source_call_id uuid,
    end_seq bigint,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT calls_pkey PRIMARY KEY (id),
    CONSTRAINT calls_status_check CHECK (status = ANY (ARRAY['running'::text, 'waiting_for_input'::text, 'completed'::text, 'failed'::text, 'interrupted'::text, 'cancelled'::text])),
    CONSTRAINT calls_target_kind_target_name_fkey FOREIGN KEY (target_kind, target_name) REFERENCES targets(kind, name)
);

CREATE TABLE execution_events (
    call_id uuid NOT NULL,
    index bigint NOT NULL,
    kind text NOT NULL,
    text text DEFAULT ''::text NOT NULL,
    tool_name text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT execution_events_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT execution_events_pkey PRIMARY KEY (call_id, index)
);

CREATE TABLE execution_messages (
    call_id uuid NOT NULL,
    index bigint NOT NULL,
    role text NOT NULL,
    text text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT execution_messages_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT execution_messages_pkey PRIMARY KEY (call_id, index)
);

CREATE TABLE execution_reports (
    call_id uuid NOT NULL,
    sequence bigint NOT NULL,
    CONSTRAINT execution_reports_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT execution_reports_pkey PRIMARY KEY (call_id, sequence)
);

CREATE TABLE files (
    call_id uuid NOT NULL,
    name text NOT NULL,
    blob_id uuid NOT NULL,
    size bigint NOT NULL,
    media_type text DEFAULT 'application/octet-stream'::text NOT NULL,
    sha256 text NOT NULL,
    is_text boolean NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT files_blob_id_fkey FOREIGN KEY (blob_id) REFERENCES blobs(id),
    CONSTRAINT files_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT files_pkey PRIMARY KEY (call_id, name)
);

CREATE TABLE functions (
    target_kind text NOT NULL,
    target_name text NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    input_schema jsonb NOT NULL,
    output_schema jsonb,
    allowed_callers text[] DEFAULT '{}'::text[] NOT NULL,
    starts_work boolean DEFAULT false NOT NULL,
    workflow jsonb,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT functions_pkey PRIMARY KEY (target_kind, target_name, name),
    CONSTRAINT functions_target_kind_target_name_fkey FOREIGN KEY (target_kind, target_name) REFERENCES targets(kind, name)
);

CREATE TABLE notices (
    call_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    text text NOT NULL,
    attributes jsonb NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    failed_at timestamp with time zone,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error_code text,
    last_error_reason text,
    CONSTRAINT notices_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT notices_pkey PRIMARY KEY (call_id)
);

CREATE TABLE questions (
    call_id uuid NOT NULL,
    ask_id text NOT NULL,
    seq integer NOT NULL,
    question text NOT NULL,
    reply text,
    answered_by text,
    asked_at timestamp with time zone DEFAULT now() NOT NULL,
    answered_at timestamp with time zone,
    withdrawn_at timestamp with time zone,
    choices text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT questions_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT questions_call_id_seq_key UNIQUE (call_id, seq),
    CONSTRAINT questions_pkey PRIMARY KEY (call_id, ask_id)
);

CREATE TABLE queued_calls (
    call_id uuid NOT NULL,
    target_kind text NOT NULL,
    target_name text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT queued_calls_pkey PRIMARY KEY (call_id)
);

CREATE TABLE targets (
    kind text NOT NULL,
    name text NOT NULL,
    owner text NOT NULL,
    running_limit integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT targets_kind_check CHECK (kind = ANY (ARRAY['crew'::text, 'workflow'::text])),
    CONSTRAINT targets_pkey PRIMARY KEY (kind, name),
    CONSTRAINT targets_running_limit_check CHECK (running_limit >= 0)
);

CREATE TABLE workflow_steps (
    call_id uuid NOT NULL,
    index bigint NOT NULL,
    step text NOT NULL,
    group_name text DEFAULT ''::text NOT NULL,
    status text NOT NULL,
    detail text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_steps_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls(id),
    CONSTRAINT workflow_steps_pkey PRIMARY KEY (call_id, index)
);

CREATE INDEX blobs_incomplete ON functions.blobs USING btree (created_at) WHERE (NOT complete);

CREATE UNIQUE INDEX calls_ends_of_caller ON functions.calls USING btree (caller, end_seq) WHERE (end_seq IS NOT NULL);

CREATE INDEX calls_leased ON functions.calls USING btree (lease_expires_at) WHERE ((runtime IS NOT NULL) AND (status = ANY (ARRAY['running'::text, 'waiting_for_input'::text])));

CREATE INDEX calls_listed ON functions.calls USING btree (created_at, id);

CREATE INDEX calls_listed_by_caller ON functions.calls USING btree (caller, created_at, id);

CREATE INDEX calls_listed_by_target ON functions.calls USING btree (target_kind, target_name, created_at, id);

CREATE INDEX calls_open ON functions.calls USING btree (target_kind, target_name) WHERE (status = ANY (ARRAY['running'::text, 'waiting_for_input'::text]));

CREATE UNIQUE INDEX calls_submission ON functions.calls USING btree (caller, submission_key) WHERE (submission_key IS NOT NULL);

CREATE INDEX notices_due ON functions.notices USING btree (next_attempt_at) WHERE ((delivered_at IS NULL) AND (failed_at IS NULL));

CREATE INDEX queued_calls_oldest ON functions.queued_calls USING btree (target_kind, target_name, created_at);

CREATE INDEX targets_by_owner ON functions.targets USING btree (owner, kind, name);

CREATE OR REPLACE FUNCTION functions.create_call(p_id uuid, p_target_kind text, p_target_name text, p_function text, p_caller text, p_inputs jsonb, p_description text, p_output_schema jsonb, p_starts_work boolean, p_workflow jsonb, p_variables jsonb, p_run_id uuid, p_source jsonb, p_submission_key text, p_request_hash text, p_notify_conversation_id uuid, p_default_limit integer, p_caller_share integer, p_traceparent text, p_source_call_id uuid, OUT running_limit integer, OUT inserted boolean)
 RETURNS record
 LANGUAGE sql
AS $function$
    SELECT * FROM functions.create_call_v4(
        p_id, p_target_kind, p_target_name, p_function, p_caller, p_inputs, p_description,
        p_output_schema, p_starts_work, p_workflow, p_variables, p_run_id, p_source,
        p_submission_key, p_request_hash, p_notify_conversation_id, p_default_limit,
        p_caller_share, p_traceparent, p_source_call_id)
$function$;

CREATE OR REPLACE FUNCTION functions.create_call_v4(p_id uuid, p_target_kind text, p_target_name text, p_function text, p_caller text, p_inputs jsonb, p_description text, p_output_schema jsonb, p_starts_work boolean, p_workflow jsonb, p_variables jsonb, p_run_id uuid, p_source jsonb, p_submission_key text, p_request_hash text, p_notify_conversation_id uuid, p_default_limit integer, p_caller_share integer, p_traceparent text, p_source_call_id uuid, OUT running_limit integer, OUT inserted boolean)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    open_calls bigint;
    caller_calls bigint;
    target_limit integer;
    caller_limit integer;
BEGIN
    SELECT t.running_limit INTO running_limit FROM functions.targets t
    WHERE t.kind = p_target_kind AND t.name = p_target_name
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO functions.calls
        (id, target_kind, target_name, function, caller, inputs, description, output_schema,
         starts_work, workflow, variables, run_id, source, submission_key, request_hash,
         notify_conversation_id, status, traceparent, source_call_id)
    VALUES (p_id, p_target_kind, p_target_name, p_function, p_caller, p_inputs,
            p_description, p_output_schema, p_starts_work, p_workflow, p_variables, p_run_id,
            p_source, p_submission_key, p_request_hash, p_notify_conversation_id, 'running',
            p_traceparent, p_source_call_id)
    ON CONFLICT (caller, submission_key) WHERE submission_key IS NOT NULL DO NOTHING;
    inserted := FOUND;
    IF NOT inserted THEN
        RETURN;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE c.caller = p_caller)
    INTO open_calls, caller_calls FROM functions.calls c
    WHERE c.target_kind = p_target_kind AND c.target_name = p_target_name
      AND c.status IN ('running', 'waiting_for_input');
    target_limit := coalesce(nullif(running_limit, 0), p_default_limit);
    IF open_calls > target_limit THEN
        RAISE EXCEPTION 'busy' USING ERRCODE = 'AW001',
            DETAIL = (open_calls - 1) || '/' || target_limit;
    END IF;
    caller_limit := greatest(1, (target_limit * p_caller_share) / 100);
    IF caller_calls > caller_limit THEN
        RAISE EXCEPTION 'busy caller' USING ERRCODE = 'AW002',
            DETAIL = (caller_calls - 1) || '/' || caller_limit || '/' || target_limit;
    END IF;
    -- Sent at commit, so never for a refused call.
    PERFORM pg_notify('functions_executions', p_target_kind || ':' || p_target_name);
END
$function$;

CREATE OR REPLACE FUNCTION functions.number_call_end_v1()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO functions.caller_ends AS e (caller, last_end) VALUES (NEW.caller, 1)
    ON CONFLICT (caller) DO UPDATE SET last_end = e.last_end + 1
    RETURNING last_end INTO NEW.end_seq;
    PERFORM pg_notify('functions_calls', 'ends:' || NEW.caller);
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION functions.queue_call()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO functions.queued_calls (call_id, target_kind, target_name, created_at)
    VALUES (NEW.id, NEW.target_kind, NEW.target_name, NEW.created_at);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE FUNCTION functions.touch_call_v1()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$function$;

CREATE OR REPLACE FUNCTION functions.unqueue_call()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM functions.queued_calls WHERE call_id = OLD.id;
    RETURN NULL;
END
$function$;

CREATE TRIGGER calls_number_end BEFORE UPDATE OF status ON calls FOR EACH ROW WHEN ((old.status = ANY (ARRAY['running'::text, 'waiting_for_input'::text])) AND (new.status <> ALL (ARRAY['running'::text, 'waiting_for_input'::text]))) EXECUTE FUNCTION number_call_end_v1();

CREATE TRIGGER calls_queue AFTER INSERT ON calls FOR EACH ROW WHEN (new.status = 'running'::text AND new.runtime IS NULL) EXECUTE FUNCTION queue_call();

CREATE TRIGGER calls_touch BEFORE UPDATE OF version ON calls FOR EACH ROW WHEN (new.version IS DISTINCT FROM old.version) EXECUTE FUNCTION touch_call_v1();

CREATE TRIGGER calls_unqueue AFTER UPDATE OF status, runtime ON calls FOR EACH ROW WHEN (old.status = 'running'::text AND old.runtime IS NULL AND (new.status <> 'running'::text OR new.runtime IS NOT NULL)) EXECUTE FUNCTION unqueue_call();
