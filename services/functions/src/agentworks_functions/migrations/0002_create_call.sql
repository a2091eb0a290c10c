-- Call (F4-F6) in one statement and one round trip, in autocommit: lock the target row,
-- insert the call unless its retry key exists, then count the target's open calls.
-- Each statement of a PL/pgSQL function takes a fresh snapshot (READ COMMITTED), so the
-- count, taken after the lock was granted, sees every call an earlier holder committed:
-- the running limit stays exact. Over the limit it raises SQLSTATE AW001 ("busy", with
-- "<other open calls>/<limit>" in DETAIL), which undoes the insert: nothing is stored.
-- `running_limit` comes back NULL when the target is not registered, `inserted` false
-- when a call with the same retry key exists (the caller looks that one up).
CREATE FUNCTION functions.create_call(
    p_id uuid, p_target_kind text, p_target_name text, p_function text, p_caller text,
    p_inputs jsonb, p_description text, p_output_schema jsonb, p_starts_work boolean,
    p_workflow jsonb, p_variables jsonb, p_run_id uuid, p_source jsonb,
    p_submission_key text, p_request_hash text, p_notify_conversation_id uuid,
    p_default_limit integer,
    OUT running_limit integer, OUT inserted boolean
) LANGUAGE plpgsql AS $$
DECLARE
    open_calls bigint;
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
         notify_conversation_id, status)
    VALUES (p_id, p_target_kind, p_target_name, p_function, p_caller, p_inputs,
            p_description, p_output_schema, p_starts_work, p_workflow, p_variables, p_run_id,
            p_source, p_submission_key, p_request_hash, p_notify_conversation_id, 'running')
    ON CONFLICT (caller, submission_key) WHERE submission_key IS NOT NULL DO NOTHING;
    inserted := FOUND;
    IF NOT inserted THEN
        RETURN;
    END IF;
    SELECT count(*) INTO open_calls FROM functions.calls c
    WHERE c.target_kind = p_target_kind AND c.target_name = p_target_name
      AND c.status IN ('running', 'waiting_for_input');
    IF open_calls > coalesce(nullif(running_limit, 0), p_default_limit) THEN
        RAISE EXCEPTION 'busy' USING ERRCODE = 'AW001',
            DETAIL = (open_calls - 1) || '/' || coalesce(nullif(running_limit, 0), p_default_limit);
    END IF;
    -- Sent at commit, so never for a refused call.
    PERFORM pg_notify('functions_executions', p_target_kind || ':' || p_target_name);
END
$$;
