"""The fixed SQL of the functions hot paths (see `agentworks.server.db.fixed_sql`)."""

from __future__ import annotations

from agentworks.server.db import fixed_sql

# Claim due notices for one send: each one a session advisory lock of the claiming
# connection, skipped when another replica holds it (see NoticeQueries.deliver_notices).
# The locks are tried on a bounded window of the oldest due notices (four batches, so a
# few replicas sending at once do not starve the next), never in the scan itself: a lock
# in the scan's WHERE may be taken for every due row before the sort and the LIMIT, and
# a backlog would fill PostgreSQL's shared lock table ("out of shared memory").
_NOTICES_CLAIM = fixed_sql(
    """
WITH due AS MATERIALIZED (
    SELECT call_id FROM functions.notices
    WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT :batch * 4
), claimed AS MATERIALIZED (
    SELECT call_id FROM due
    WHERE pg_try_advisory_lock(:lock, hashtext(call_id::text))
    LIMIT :batch
)
SELECT n.call_id, n.conversation_id, n.text, n.attributes, n.attempts
FROM functions.notices n JOIN claimed USING (call_id)
ORDER BY n.next_attempt_at
"""
)

# One sent batch's outcomes (deliver_notices), a row per notice: delivered, gave up, or
# neither (due again after :delays seconds); a failure's code, reason and message.
_NOTICES_ATTEMPTED = fixed_sql(
    """
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
    CAST(:ids AS uuid[]), CAST(:delivered AS boolean[]), CAST(:gave_up AS boolean[]),
    CAST(:codes AS text[]), CAST(:reasons AS text[]), CAST(:messages AS text[]),
    CAST(:delays AS float8[])
) AS b (call_id, delivered, gave_up, code, reason, message, delay)
WHERE n.call_id = b.call_id
"""
)

# Claim the oldest unclaimed call of one target (:claim_kind, :claim_name) for :runtime,
# skipping calls other claims hold: ClaimExecution, and a finish that claims the next.
# The oldest come from the queue (migrations/0011_queued_calls.sql: the claim's only
# index, whatever the table statistics); the lock is on the call's row, taken before the
# queue row its trigger deletes, in the order every other change of a call takes them.
_CLAIM_CTES = """oldest AS (
    SELECT c.id FROM functions.queued_calls q JOIN functions.calls c ON c.id = q.call_id
    WHERE {only_if} q.target_kind = :claim_kind AND q.target_name = :claim_name
      AND c.status = 'running' AND c.runtime IS NULL
    ORDER BY q.created_at
    LIMIT 1
    FOR UPDATE OF c SKIP LOCKED
), claimed AS (
    UPDATE functions.calls c
    SET runtime = :runtime, claimed_at = now(), lease_expires_at = now() + :lease,
        version = c.version + 1
    FROM oldest WHERE c.id = oldest.id
    RETURNING c.*
)"""

# FinishExecution: end the call once (guarded by status, runtime and correction round),
# queue its completion notice in the same statement, and wake its status waiters.
_FINISH = fixed_sql(
    """
WITH ended AS (
    UPDATE functions.calls
    SET status = :status, answer = :answer, has_result = :has_result, result = :result,
        error = :error, ended_at = now(), version = version + 1
    WHERE id = :call_id AND runtime = :runtime AND correction_turns = :correction_turns
      AND status IN ('running', 'waiting_for_input')
      AND (NOT :plain OR (coalesce(output_schema, 'null') = 'null'
                          AND notify_conversation_id IS NULL))
    RETURNING id, status, target_kind, target_name, function, notify_conversation_id,
              starts_work
), notice AS (
    INSERT INTO functions.notices (call_id, conversation_id, text, attributes)
    SELECT id, notify_conversation_id, :notice_text,
           jsonb_build_object('call_id', CAST(id AS text), 'status', status,
                              'target', target_kind || ':' || target_name,
                              'function', function,
                              'start_receipt', starts_work AND status = 'completed')
    FROM ended WHERE notify_conversation_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING call_id
), """
    + _CLAIM_CTES.format(only_if=":claim AND EXISTS (SELECT 1 FROM ended) AND")
    + """
SELECT (SELECT status FROM ended) AS ended_status,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM ended) AS call_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text) || ' ended') FROM ended)
           AS end_notified,
       (SELECT pg_notify('functions_notices', 'due') FROM notice) AS notice_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM claimed) AS claim_notified,
       claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true
"""
)

# GetStatus: the call, its target's owner and every page in one statement and snapshot.
_STATUS = fixed_sql(
    """
SELECT c.*, t.owner AS target_owner,
    (SELECT coalesce(json_agg(m ORDER BY m.index), '[]')
     FROM (SELECT index, role, text, created_at FROM functions.execution_messages
           WHERE call_id = c.id AND index > :after ORDER BY index LIMIT :message_limit) m
    ) AS page_messages,
    (SELECT coalesce(json_agg(e ORDER BY e.index), '[]')
     FROM (SELECT index, kind, text, tool_name, created_at FROM functions.execution_events
           WHERE call_id = c.id AND index > :after_event ORDER BY index LIMIT :event_limit) e
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
    CASE WHEN c.status = 'waiting_for_input' THEN
        (SELECT question FROM functions.questions
         WHERE call_id = c.id AND reply IS NULL AND withdrawn_at IS NULL
         ORDER BY seq DESC LIMIT 1)
    END AS pending_question
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = :call_id
"""
)

_FUNCTION_FOR_CALL = fixed_sql(
    """
SELECT t.owner AS target_owner, t.running_limit,
       (SELECT count(*) FROM functions.calls c
        WHERE c.target_kind = t.kind AND c.target_name = t.name
          AND c.status IN ('running', 'waiting_for_input')) AS open_calls,
       f.*
FROM functions.targets t
LEFT JOIN functions.functions f
    ON f.target_kind = t.kind AND f.target_name = t.name AND f.name = :name
WHERE t.kind = :kind AND t.name = :target_name
"""
)

# Call: see migrations/0002_create_call.sql.
_CREATE_CALL = fixed_sql(
    """
SELECT * FROM functions.create_call(
    :id, :target_kind, :target_name, :function, :caller, :inputs, :description,
    :output_schema, :starts_work, :workflow, :variables, :run_id, :source, :submission_key,
    :request_hash, :notify_conversation_id, :default_limit, :caller_share, :traceparent,
    :source_call_id)
"""
)

# What create_call raises when the target is at its running limit.
BUSY_SQLSTATE = "AW001"
# A caller at its share of the target's limit (migration 0007).
CALLER_BUSY_SQLSTATE = "AW002"

# ClaimExecution for one target (the common case).
_CLAIM_ONE = fixed_sql(
    "WITH "
    + _CLAIM_CTES.format(only_if="")
    + """
SELECT claimed.*, pg_notify('functions_calls', CAST(claimed.id AS text)) AS notified
FROM claimed
"""
)

_GET_CALL = fixed_sql("SELECT * FROM functions.calls WHERE id = :call_id")

_CALL_ACCESS = fixed_sql(
    """
SELECT c.caller, t.owner
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = :call_id
"""
)

_SUBMISSION = fixed_sql(
    """
SELECT id, status, request_hash FROM functions.calls
WHERE caller = :caller AND submission_key = :key
"""
)

_CALL_STATUS = fixed_sql("SELECT status FROM functions.calls WHERE id = :call_id")
