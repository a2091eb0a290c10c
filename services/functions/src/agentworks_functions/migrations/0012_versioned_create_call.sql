-- PL/pgSQL functions are versioned by name (issue 36): a change adds the next version
-- in a new migration, and the store calls the new name, instead of a migration dropping
-- and restating one function (create_call was written whole in 0002, 0007, 0009 and
-- 0010). create_call_v4 is 0010's create_call, the fourth version, under its own name;
-- the next change adds create_call_v5.
--
-- The old name stays for one release, as a one-line SQL function calling v4: pods of
-- the previous release still call it during a rolling update. A later migration drops
-- it (DROP FUNCTION functions.create_call(uuid, text, text, text, text, jsonb, text,
-- jsonb, boolean, jsonb, jsonb, uuid, jsonb, text, text, uuid, integer, integer, text,
-- uuid)).

CREATE FUNCTION functions.create_call_v4(
    p_id uuid, p_target_kind text, p_target_name text, p_function text, p_caller text,
    p_inputs jsonb, p_description text, p_output_schema jsonb, p_starts_work boolean,
    p_workflow jsonb, p_variables jsonb, p_run_id uuid, p_source jsonb,
    p_submission_key text, p_request_hash text, p_notify_conversation_id uuid,
    p_default_limit integer, p_caller_share integer, p_traceparent text,
    p_source_call_id uuid,
    OUT running_limit integer, OUT inserted boolean
) LANGUAGE plpgsql AS $$
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
$$;

CREATE OR REPLACE FUNCTION functions.create_call(
    p_id uuid, p_target_kind text, p_target_name text, p_function text, p_caller text,
    p_inputs jsonb, p_description text, p_output_schema jsonb, p_starts_work boolean,
    p_workflow jsonb, p_variables jsonb, p_run_id uuid, p_source jsonb,
    p_submission_key text, p_request_hash text, p_notify_conversation_id uuid,
    p_default_limit integer, p_caller_share integer, p_traceparent text,
    p_source_call_id uuid,
    OUT running_limit integer, OUT inserted boolean
) LANGUAGE sql AS $$
    SELECT * FROM functions.create_call_v4(
        p_id, p_target_kind, p_target_name, p_function, p_caller, p_inputs, p_description,
        p_output_schema, p_starts_work, p_workflow, p_variables, p_run_id, p_source,
        p_submission_key, p_request_hash, p_notify_conversation_id, p_default_limit,
        p_caller_share, p_traceparent, p_source_call_id)
$$;
