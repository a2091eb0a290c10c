-- The functions service's SQL: every statement of its store, by name (agentworks.server.queries).
-- Parameters are psycopg's %(name)s; `(prepared)` marks the hot statements, which psycopg
-- prepares on a connection after their fifth run there. Concurrency rests on PostgreSQL
-- alone (P3), see store/__init__.py: the target row lock for the running limit (F5), the
-- unique retry key (F6), each call's row lock for every change to its execution, ends
-- guarded by status, and pg_notify at commit.

-- ====================================================== targets and functions (F1, F2, F5)

-- look_alike_target --
-- A registered target whose name differs from %(name)s only by case (B10): one stored
-- before names had to be lower-case.
SELECT name FROM functions.targets
WHERE kind = %(kind)s AND lower(name) = %(lower_name)s AND name <> %(name)s
LIMIT 1;

-- put_target --
INSERT INTO functions.targets (kind, name, owner, running_limit)
VALUES (%(kind)s, %(name)s, %(owner)s, %(running_limit)s)
ON CONFLICT (kind, name) DO UPDATE
SET owner = %(owner)s, running_limit = %(running_limit)s, updated_at = now()
RETURNING *;

-- get_target --
SELECT * FROM functions.targets WHERE kind = %(kind)s AND name = %(name)s;

-- put_function --
INSERT INTO functions.functions
    (target_kind, target_name, name, description, input_schema, output_schema,
     allowed_callers, starts_work, workflow)
VALUES (%(target_kind)s, %(target_name)s, %(name)s, %(description)s, %(input_schema)s,
        %(output_schema)s, %(allowed_callers)s, %(starts_work)s, %(workflow)s)
ON CONFLICT (target_kind, target_name, name) DO UPDATE
SET description = %(description)s, input_schema = %(input_schema)s,
    output_schema = %(output_schema)s, allowed_callers = %(allowed_callers)s,
    starts_work = %(starts_work)s, workflow = %(workflow)s, updated_at = now()
RETURNING *;

-- delete_function --
DELETE FROM functions.functions
WHERE target_kind = %(kind)s AND target_name = %(target_name)s AND name = %(name)s;

-- get_function --
SELECT * FROM functions.functions
WHERE target_kind = %(kind)s AND target_name = %(target_name)s AND name = %(name)s;

-- list_functions --
SELECT * FROM functions.functions
WHERE target_kind = %(kind)s AND target_name = %(target_name)s
ORDER BY name;

-- ========================================= calls: limit, retry keys, status (F4-F9, F11, F15)

-- function_for_call (prepared) --
SELECT t.owner AS target_owner, t.running_limit,
       (SELECT count(*) FROM functions.calls c
        WHERE c.target_kind = t.kind AND c.target_name = t.name
          AND c.status IN ('running', 'waiting_for_input')) AS open_calls,
       f.*
FROM functions.targets t
LEFT JOIN functions.functions f
    ON f.target_kind = t.kind AND f.target_name = t.name AND f.name = %(name)s
WHERE t.kind = %(kind)s AND t.name = %(target_name)s;

-- create_call (prepared) --
-- Call: functions.create_call_v4 (migrations/0012_versioned_create_call.sql) locks the
-- target row, inserts the call and counts the target's open calls; over the limit it
-- raises AW001 (AW002: the caller's share), which undoes the insert.
-- Call: see migrations/0002_create_call.sql.
SELECT * FROM functions.create_call_v4(
    %(id)s, %(target_kind)s, %(target_name)s, %(function)s, %(caller)s, %(inputs)s, %(description)s,
    %(output_schema)s, %(starts_work)s, %(workflow)s, %(variables)s, %(run_id)s, %(source)s, %(submission_key)s,
    %(request_hash)s, %(notify_conversation_id)s, %(default_limit)s, %(caller_share)s, %(traceparent)s,
    %(source_call_id)s);

-- submission (prepared) --
SELECT id, status, request_hash FROM functions.calls
WHERE caller = %(caller)s AND submission_key = %(key)s;

-- call_status (prepared) --
SELECT status FROM functions.calls WHERE id = %(call_id)s;

-- get_call (prepared) --
SELECT * FROM functions.calls WHERE id = %(call_id)s;

-- call_access (prepared) --
SELECT c.caller, t.owner
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = %(call_id)s;

-- call_status_page (prepared) --
-- GetStatus: the call, its target's owner and every page in one statement and snapshot.
SELECT c.*, t.owner AS target_owner,
    (SELECT coalesce(json_agg(m ORDER BY m.index), '[]')
     FROM (SELECT index, role, text, created_at FROM functions.execution_messages
           WHERE call_id = c.id AND index > %(after)s ORDER BY index LIMIT %(message_limit)s) m
    ) AS page_messages,
    (SELECT coalesce(json_agg(e ORDER BY e.index), '[]')
     FROM (SELECT index, kind, text, tool_name, created_at FROM functions.execution_events
           WHERE call_id = c.id AND index > %(after_event)s ORDER BY index LIMIT %(event_limit)s) e
    ) AS page_events,
    (SELECT coalesce(json_agg(f ORDER BY f.name), '[]')
     FROM (SELECT name, size, media_type, sha256, is_text, created_at, blob_id
           FROM functions.files WHERE call_id = c.id) f
    ) AS page_files,
    CASE WHEN c.run_id IS NOT NULL THEN
        (SELECT coalesce(json_agg(s ORDER BY s.index), '[]')
         FROM (SELECT index, step, group_name, status, detail, created_at
               FROM functions.workflow_steps WHERE call_id = c.id) s)
    END AS page_steps,
    (SELECT coalesce(json_agg(q ORDER BY q.seq), '[]')
     FROM (SELECT ask_id, seq, question, choices, asked_at, answered_at, withdrawn_at
           FROM functions.questions WHERE call_id = c.id
           ORDER BY seq DESC LIMIT %(question_limit)s) q
    ) AS page_questions
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = %(call_id)s;

-- lock_call --
-- A call's row, locked for a change to its execution.
SELECT * FROM functions.calls WHERE id = %(call_id)s FOR UPDATE;

-- answer_question --
UPDATE functions.questions SET reply = %(reply)s, answered_by = %(by)s, answered_at = now()
WHERE call_id = %(call_id)s AND reply IS NULL AND withdrawn_at IS NULL
RETURNING ask_id;

-- call_running_again --
UPDATE functions.calls SET status = 'running', version = version + 1
WHERE id = %(call_id)s;

-- notify --
-- A notification, sent when the surrounding transaction commits.
SELECT pg_notify(%(channel)s, %(payload)s);

-- ============================================================ ending calls (F12, F13)

-- end_calls --
-- End open calls once (guarded by status).
UPDATE functions.calls
SET status = %(status)s, answer = %(answer)s, has_result = %(has_result)s,
    result = %(result)s, error = %(error)s, ended_at = now(), version = version + 1
WHERE id = ANY(%(ids)s) AND status IN ('running', 'waiting_for_input')
RETURNING *;

-- lock_caller_ends --
-- Before a batch of calls ends: the callers' caller_ends rows, locked in caller order.
-- Each end takes its caller's row (migrations/0013_call_ends.sql's trigger) in the order
-- the update meets the calls; taken here first, in one order, two batches of the same
-- callers cannot each hold a row the other waits for (a deadlock).
INSERT INTO functions.caller_ends AS e (caller, last_end)
SELECT DISTINCT caller, 0 FROM functions.calls WHERE id = ANY(%(ids)s) ORDER BY caller
ON CONFLICT (caller) DO UPDATE SET last_end = e.last_end;

-- queue_notice --
-- The completion notice of an ended call (F13), once.
INSERT INTO functions.notices (call_id, conversation_id, text, attributes)
VALUES (%(call_id)s, %(conversation_id)s, %(text)s, %(attributes)s)
ON CONFLICT DO NOTHING;

-- expired_executions --
-- Open calls whose runtime stopped renewing the lease, locked (others' skipped).
SELECT id FROM functions.calls
WHERE status IN ('running', 'waiting_for_input') AND runtime IS NOT NULL AND lease_expires_at < now()
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED;

-- unanswered_calls --
-- Calls waiting for an answer to a question older than %(older_than)s, locked.
SELECT c.id FROM functions.calls c
WHERE c.status IN ('running', 'waiting_for_input') AND c.status = 'waiting_for_input'
  AND EXISTS (SELECT 1 FROM functions.questions q
              WHERE q.call_id = c.id AND q.reply IS NULL AND q.withdrawn_at IS NULL
                AND q.asked_at < now() - CAST(%(older_than)s AS interval))
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED;

-- unclaimed_calls --
-- Calls no runtime claimed within %(older_than)s, locked.
SELECT id FROM functions.calls
WHERE status IN ('running', 'waiting_for_input') AND runtime IS NULL
  AND created_at < now() - CAST(%(older_than)s AS interval)
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED;

-- ================================================= executions (R1, F10-F12)

-- claim_execution_of_target (prepared) --
-- Claim the oldest unclaimed call of one target for %(runtime)s, skipping calls other
-- claims hold: ClaimExecution, and a finish that claims the next. The oldest come from
-- the queue (migrations/0011_queued_calls.sql: the claim's only index, whatever the
-- table statistics); the lock is on the call's row, taken before the queue row its
-- trigger deletes, in the order every other change of a call takes them.
-- ClaimExecution for one target (the common case).
WITH oldest AS (
    SELECT c.id FROM functions.queued_calls q JOIN functions.calls c ON c.id = q.call_id
    WHERE  q.target_kind = %(claim_kind)s AND q.target_name = %(claim_name)s
      AND c.status = 'running' AND c.runtime IS NULL
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), claimed AS (
    UPDATE functions.calls c
    SET runtime = %(runtime)s, claimed_at = now(), lease_expires_at = now() + %(lease)s,
        version = c.version + 1
    FROM oldest WHERE c.id = oldest.id
    RETURNING c.*
)
SELECT claimed.*, pg_notify('functions_calls', CAST(claimed.id AS text)) AS notified
FROM claimed;

-- claim_execution_of_targets --
-- claim_execution_of_target for any of several targets (%(kinds)s and %(names)s pairwise).
WITH oldest AS (
    SELECT c.id FROM functions.queued_calls q JOIN functions.calls c ON c.id = q.call_id
    WHERE (q.target_kind, q.target_name) IN (
            SELECT kind, name FROM unnest(CAST(%(kinds)s AS text[]), CAST(%(names)s AS text[]))
                AS k (kind, name))
      AND c.status = 'running' AND c.runtime IS NULL
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), claimed AS (
    UPDATE functions.calls c
    SET runtime = %(runtime)s, claimed_at = now(), lease_expires_at = now() + %(lease)s,
        version = c.version + 1
    FROM oldest WHERE c.id = oldest.id
    RETURNING c.*
)
SELECT claimed.*, pg_notify('functions_calls', CAST(claimed.id AS text)) AS notified
FROM claimed;

-- extend_execution_lease --
UPDATE functions.calls SET lease_expires_at = now() + %(lease)s
WHERE id = %(call_id)s AND runtime = %(runtime)s AND status IN ('running', 'waiting_for_input')
RETURNING status, lease_expires_at;

-- execution_lease --
SELECT status, runtime, lease_expires_at FROM functions.calls WHERE id = %(call_id)s;

-- store_report_sequence --
-- A report's sequence number, once: none returned for a retry of a stored report.
INSERT INTO functions.execution_reports (call_id, sequence)
VALUES (%(call_id)s, %(sequence)s)
ON CONFLICT DO NOTHING
RETURNING sequence;

-- add_messages --
-- A report's messages, numbered on from %(first)s.
INSERT INTO functions.execution_messages (call_id, index, role, text)
SELECT %(call_id)s, %(first)s + m.n - 1, m.role, m.text
FROM unnest(CAST(%(roles)s AS text[]), CAST(%(texts)s AS text[]))
    WITH ORDINALITY AS m (role, text, n);

-- add_events --
INSERT INTO functions.execution_events (call_id, index, kind, text, tool_name)
SELECT %(call_id)s, %(first)s + e.n - 1, e.kind, e.text, e.tool_name
FROM unnest(CAST(%(kinds)s AS text[]), CAST(%(texts)s AS text[]),
            CAST(%(tool_names)s AS text[]))
    WITH ORDINALITY AS e (kind, text, tool_name, n);

-- add_steps --
INSERT INTO functions.workflow_steps (call_id, index, step, group_name, status, detail)
SELECT %(call_id)s, %(first)s + s.n - 1, s.step, s.group_name, s.status, s.detail
FROM unnest(CAST(%(steps)s AS text[]), CAST(%(groups)s AS text[]),
            CAST(%(statuses)s AS text[]), CAST(%(details)s AS text[]))
    WITH ORDINALITY AS s (step, group_name, status, detail, n);

-- count_report --
-- A report's counts; its progress line and sequence only when it is the latest (NULL
-- keeps the stored ones).
UPDATE functions.calls
SET message_count = %(message_count)s, event_count = %(event_count)s,
    step_count = %(step_count)s, version = version + 1,
    last_report_seq = coalesce(CAST(%(last_report_seq)s AS bigint), last_report_seq),
    progress = CASE WHEN %(set_progress)s THEN %(progress)s ELSE progress END
WHERE id = %(call_id)s;

-- question --
SELECT * FROM functions.questions WHERE call_id = %(call_id)s AND ask_id = %(ask_id)s;

-- pending_question --
SELECT ask_id, choices FROM functions.questions
WHERE call_id = %(call_id)s AND reply IS NULL AND withdrawn_at IS NULL;

-- add_question --
INSERT INTO functions.questions (call_id, ask_id, seq, question, choices)
VALUES (%(call_id)s, %(ask_id)s, %(seq)s, %(question)s, %(choices)s);

-- call_waiting_for_input --
UPDATE functions.calls
SET status = 'waiting_for_input', question_count = %(question_count)s, version = version + 1
WHERE id = %(call_id)s;

-- withdraw_question --
UPDATE functions.questions SET withdrawn_at = now()
WHERE call_id = %(call_id)s AND ask_id = %(ask_id)s;

-- question_state --
SELECT q.reply, c.status
FROM functions.questions q JOIN functions.calls c ON c.id = q.call_id
WHERE q.call_id = %(call_id)s AND q.ask_id = %(ask_id)s;

-- add_correction_event --
INSERT INTO functions.execution_events (call_id, index, kind, text)
VALUES (%(call_id)s, %(index)s, 'correction', %(text)s);

-- grant_correction --
UPDATE functions.calls
SET correction_turns = 1, correction_prompt = %(prompt)s, event_count = %(event_count)s,
    version = version + 1
WHERE id = %(call_id)s;

-- finish_execution (prepared) --
-- FinishExecution: end the call once (guarded by status, runtime and correction round),
-- queue its completion notice in the same statement, and wake its status waiters.
WITH ended AS (
    UPDATE functions.calls
    SET status = %(status)s, answer = %(answer)s, has_result = %(has_result)s, result = %(result)s,
        error = %(error)s, ended_at = now(), version = version + 1
    WHERE id = %(call_id)s AND runtime = %(runtime)s AND correction_turns = %(correction_turns)s
      AND status IN ('running', 'waiting_for_input')
      AND (NOT %(plain)s OR (coalesce(output_schema, 'null') = 'null'
                          AND notify_conversation_id IS NULL))
    RETURNING id, status, target_kind, target_name, function, notify_conversation_id,
              starts_work
), notice AS (
    INSERT INTO functions.notices (call_id, conversation_id, text, attributes)
    SELECT id, notify_conversation_id, %(notice_text)s,
           jsonb_build_object('call_id', CAST(id AS text), 'status', status,
                              'target', target_kind || ':' || target_name,
                              'function', function,
                              'start_receipt', starts_work AND status = 'completed')
    FROM ended WHERE notify_conversation_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING call_id
), oldest AS (
    SELECT c.id FROM functions.queued_calls q JOIN functions.calls c ON c.id = q.call_id
    WHERE %(claim)s AND EXISTS (SELECT 1 FROM ended) AND q.target_kind = %(claim_kind)s AND q.target_name = %(claim_name)s
      AND c.status = 'running' AND c.runtime IS NULL
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), claimed AS (
    UPDATE functions.calls c
    SET runtime = %(runtime)s, claimed_at = now(), lease_expires_at = now() + %(lease)s,
        version = c.version + 1
    FROM oldest WHERE c.id = oldest.id
    RETURNING c.*
)
SELECT (SELECT status FROM ended) AS ended_status,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM ended) AS call_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text) || ' ended') FROM ended)
           AS end_notified,
       (SELECT pg_notify('functions_notices', 'due') FROM notice) AS notice_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM claimed) AS claim_notified,
       claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true;

-- ========================================================== output files (F8, T8)

-- file_blob --
SELECT blob_id FROM functions.files WHERE call_id = %(call_id)s AND name = %(name)s;

-- file_count --
SELECT count(*) FROM functions.files WHERE call_id = %(call_id)s;

-- complete_blob --
UPDATE functions.blobs SET complete = true WHERE id = %(blob_id)s;

-- put_file --
INSERT INTO functions.files (call_id, name, blob_id, size, media_type, sha256, is_text)
VALUES (%(call_id)s, %(name)s, %(blob_id)s, %(size)s, %(media_type)s, %(sha256)s,
        %(is_text)s)
ON CONFLICT (call_id, name) DO UPDATE
SET blob_id = %(blob_id)s, size = %(size)s, media_type = %(media_type)s,
    sha256 = %(sha256)s, is_text = %(is_text)s, created_at = now()
RETURNING *;

-- delete_blob --
DELETE FROM functions.blobs WHERE id = %(blob_id)s;

-- call_changed --
UPDATE functions.calls SET version = version + 1 WHERE id = %(call_id)s;

-- file_info --
SELECT * FROM functions.files WHERE call_id = %(call_id)s AND name = %(name)s;

-- lock_target_files --
-- The target's row, key-share locked: two uploads of one target pass the quota in turn.
SELECT kind FROM functions.targets
WHERE kind = %(kind)s AND name = %(name)s
FOR KEY SHARE;

-- target_file_bytes --
-- The bytes of a target's stored files, the file about to be replaced aside.
SELECT coalesce(sum(f.size), 0)
FROM functions.files f JOIN functions.calls c ON c.id = f.call_id
WHERE c.target_kind = %(kind)s AND c.target_name = %(name)s
  AND NOT (f.call_id = %(call_id)s AND f.name = %(file_name)s);

-- ======================================================== the notice outbox (F13)

-- claim_notices (prepared) --
-- Claim due notices for one send: each one a session advisory lock of the claiming
-- connection, skipped when another replica holds it (see NoticeQueries.deliver_notices).
-- The locks are tried on a bounded window of the oldest due notices (four batches, so a
-- few replicas sending at once do not starve the next), never in the scan itself: a lock
-- in the scan's WHERE may be taken for every due row before the sort and the LIMIT, and
-- a backlog would fill PostgreSQL's shared lock table ("out of shared memory").
WITH due AS MATERIALIZED (
    SELECT call_id FROM functions.notices
    WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT %(batch)s * 4
), claimed AS MATERIALIZED (
    SELECT call_id FROM due
    WHERE pg_try_advisory_lock(%(lock)s, hashtext(call_id::text))
    LIMIT %(batch)s
)
SELECT n.call_id, n.conversation_id, n.text, n.attributes, n.attempts
FROM functions.notices n JOIN claimed USING (call_id)
ORDER BY n.next_attempt_at;

-- notices_attempted (prepared) --
-- One sent batch's outcomes (deliver_notices), a row per notice: delivered, gave up, or
-- neither (due again after :delays seconds); a failure's code, reason and message.
UPDATE functions.notices n
SET attempts = n.attempts + 1,
    last_error = b.message,
    last_error_code = b.code,
    last_error_reason = b.reason,
    delivered_at = CASE WHEN b.delivered THEN now() END,
    failed_at = CASE WHEN b.gave_up THEN now() END,
    next_attempt_at = CASE
        WHEN b.delivered OR b.gave_up THEN n.next_attempt_at
        ELSE now() + make_interval(secs => b.delay) END
FROM unnest(
    CAST(%(ids)s AS uuid[]), CAST(%(delivered)s AS boolean[]), CAST(%(gave_up)s AS boolean[]),
    CAST(%(codes)s AS text[]), CAST(%(reasons)s AS text[]), CAST(%(messages)s AS text[]),
    CAST(%(delays)s AS float8[])
) AS b (call_id, delivered, gave_up, code, reason, message, delay)
WHERE n.call_id = b.call_id;

-- unlock_notices --
-- Release the notices' session advisory locks before the connection goes back.
SELECT pg_advisory_unlock_all();

-- ============================================================ listing (V1)

-- list_calls --
-- Calls newest first after the key (%(after_at)s, %(after_id)s); %(viewer)s NULL is the
-- operator (every call), else the viewer's own calls and those on targets it owns. Each
-- filter given as NULL (%(statuses)s: empty) is off; never prepared, so each is planned
-- with its values and an unused filter folds away.
SELECT c.id, c.target_kind, c.target_name, c.function, c.caller, c.status, c.progress,
       CASE WHEN c.status = 'waiting_for_input' THEN
           (SELECT q.question FROM functions.questions q
            WHERE q.call_id = c.id AND q.reply IS NULL AND q.withdrawn_at IS NULL
            ORDER BY q.seq DESC LIMIT 1)
       END AS question,
       c.created_at, c.ended_at
FROM functions.calls c
WHERE (CAST(%(viewer)s AS text) IS NULL OR c.caller = CAST(%(viewer)s AS text)
       OR (c.target_kind, c.target_name) IN (
           SELECT t.kind, t.name FROM functions.targets t
           WHERE t.owner = CAST(%(viewer)s AS text)))
  AND (CAST(%(kind)s AS text) IS NULL
       OR (c.target_kind = CAST(%(kind)s AS text) AND c.target_name = CAST(%(name)s AS text)))
  AND (CAST(%(caller)s AS text) IS NULL OR c.caller = CAST(%(caller)s AS text))
  AND (cardinality(CAST(%(statuses)s AS text[])) = 0
       OR c.status = ANY(CAST(%(statuses)s AS text[])))
  AND (CAST(%(created_after)s AS timestamptz) IS NULL
       OR c.created_at >= CAST(%(created_after)s AS timestamptz))
  AND (CAST(%(created_before)s AS timestamptz) IS NULL
       OR c.created_at < CAST(%(created_before)s AS timestamptz))
  AND (CAST(%(after_at)s AS timestamptz) IS NULL
       OR (c.created_at, c.id) < (CAST(%(after_at)s AS timestamptz), CAST(%(after_id)s AS uuid)))
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s;

-- list_targets --
-- Targets by (kind, name) after (%(after_kind)s, %(after_name)s), each with its open
-- calls; %(viewer)s NULL is the operator (every target), else targets it owns or with a
-- function one of %(patterns)s admits.
SELECT t.*,
       (SELECT count(*) FROM functions.calls c
        WHERE c.target_kind = t.kind AND c.target_name = t.name
          AND c.status IN ('running', 'waiting_for_input')) AS running
FROM functions.targets t
WHERE (CAST(%(viewer)s AS text) IS NULL OR t.owner = CAST(%(viewer)s AS text)
       OR EXISTS (SELECT 1 FROM functions.functions f
                  WHERE f.target_kind = t.kind AND f.target_name = t.name
                    AND f.allowed_callers && CAST(%(patterns)s AS text[])))
  AND (CAST(%(kind)s AS text) IS NULL
       OR (t.kind = CAST(%(kind)s AS text) AND t.name = CAST(%(name)s AS text)))
  AND (CAST(%(after_kind)s AS text) IS NULL
       OR (t.kind, t.name) > (CAST(%(after_kind)s AS text), CAST(%(after_name)s AS text)))
ORDER BY t.kind, t.name
LIMIT %(limit)s;

-- functions_of_targets --
-- Every function of these targets (%(kinds)s and %(names)s pairwise).
SELECT * FROM functions.functions
WHERE (target_kind, target_name) IN (
    SELECT kind, name FROM unnest(CAST(%(kinds)s AS text[]), CAST(%(names)s AS text[]))
        AS k (kind, name))
ORDER BY target_kind, target_name, name;

-- ================================================ file bytes (blobs.py; F8, T8)

-- new_blob --
-- A blob being written: incomplete until a file links it (complete_blob).
INSERT INTO functions.blobs (id) VALUES (%(blob_id)s);

-- add_blob_chunk --
-- One chunk of a blob being written (each in its own statement: no transaction stays
-- open for the length of an upload).
INSERT INTO functions.blob_chunks (blob_id, seq, data)
VALUES (%(blob_id)s, %(seq)s, %(data)s);

-- close_blob --
UPDATE functions.blobs SET size = %(size)s, sha256 = %(sha256)s WHERE id = %(blob_id)s;

-- blob_chunks --
-- The chunks %(first)s..%(last)s of a blob, in order (a byte range of it).
SELECT seq, data FROM functions.blob_chunks
WHERE blob_id = %(blob_id)s AND seq >= %(first)s AND seq <= %(last)s
ORDER BY seq;

-- purge_unlinked_blobs --
-- Blobs never linked to a file, older than %(older_than)s (through blobs_incomplete).
DELETE FROM functions.blobs
WHERE NOT complete AND created_at < now() - CAST(%(older_than)s AS interval);

-- ================================================================ gauges (metrics.py, P4)

-- running_calls --
-- Per registered target: open calls, unclaimed ones, the stored limit. Only open calls
-- are read, through the partial index calls_open (its predicate's constants are written
-- here, not passed); ended calls are never scanned.
SELECT t.kind, t.name, t.running_limit,
       coalesce(open_calls.n, 0) AS running,
       coalesce(open_calls.unclaimed, 0) AS unclaimed
FROM functions.targets t
LEFT JOIN (
    SELECT target_kind, target_name, count(*) AS n,
           count(*) FILTER (WHERE status = 'running' AND runtime IS NULL) AS unclaimed
    FROM functions.calls
    WHERE status IN ('running', 'waiting_for_input')
    GROUP BY target_kind, target_name
) AS open_calls
  ON open_calls.target_kind = t.kind AND open_calls.target_name = t.name;

-- ========================================================= watching calls (N1, N5)

-- call_ends_page (prepared) --
-- WatchCallEnds: the caller's calls that ended after end %(after)s, in the order they
-- ended (calls.end_seq, numbered per caller by migrations/0013_call_ends.sql), through
-- the index calls_ends_of_caller, as status pages without messages or events.
SELECT c.*, CAST('[]' AS json) AS page_messages, CAST('[]' AS json) AS page_events,
    (SELECT coalesce(json_agg(f ORDER BY f.name), '[]')
     FROM (SELECT name, size, media_type, sha256, is_text, created_at, blob_id
           FROM functions.files WHERE call_id = c.id) f
    ) AS page_files,
    CASE WHEN c.run_id IS NOT NULL THEN
        (SELECT coalesce(json_agg(s ORDER BY s.index), '[]')
         FROM (SELECT index, step, group_name, status, detail, created_at
               FROM functions.workflow_steps WHERE call_id = c.id) s)
    END AS page_steps,
    CAST('[]' AS json) AS page_questions
FROM functions.calls c
WHERE c.caller = %(caller)s AND c.end_seq > %(after)s AND c.end_seq IS NOT NULL
ORDER BY c.end_seq
LIMIT %(limit)s;
