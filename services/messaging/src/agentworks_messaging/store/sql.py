"""The fixed SQL of the messaging hot paths (see `agentworks.server.db.fixed_sql`)."""

from __future__ import annotations

from agentworks.server.db import fixed_sql

_EARLIER_RECEIPT = fixed_sql(
    """
SELECT request_hash, message_id, conversation_id, inbox_id FROM messaging.submissions
WHERE principal = :principal AND submission_id = :submission_id
"""
)

_INBOX_PRINCIPAL = fixed_sql("SELECT principal FROM messaging.inboxes WHERE id = :inbox_id")

_READ_INBOX = fixed_sql(
    """
SELECT * FROM messaging.messages
WHERE inbox_id = :inbox_id AND direction = 'to_inbox' AND position > :after
ORDER BY position LIMIT :limit
"""
)

# Start conversations: target check, retry key, conversation, inbox, message, delivery,
# for a batch of sends given as one JSON array of objects (one field per column: one
# parameter to encode, however many sends); one result row per send, in order.
_SEND_NEW = fixed_sql(
    """
WITH input AS (
    SELECT * FROM ROWS FROM (
        json_to_recordset(CAST(:sends AS json)) AS (
            kind text, name text, refuse boolean, principal text, submission_id text,
            request_hash text, message_id uuid, conversation_id uuid, inbox_id uuid,
            delivery_id uuid, channel text, text text, parts text, target_key text)
    ) WITH ORDINALITY AS i (kind, name, refuse, principal, submission_id, request_hash,
                            message_id, conversation_id, inbox_id, delivery_id, channel,
                            text, parts, target_key, n)
), target AS (
    SELECT i.n, t.free_text_ask
    FROM input i JOIN messaging.targets t ON t.kind = i.kind AND t.name = i.name
), ok AS (
    SELECT i.* FROM input i JOIN target USING (n)
    WHERE NOT (i.refuse AND target.free_text_ask IS FALSE)
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT principal, submission_id, request_hash, message_id, conversation_id, inbox_id
    FROM ok WHERE submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING message_id
), go AS (
    SELECT * FROM ok
    WHERE submission_id = '' OR message_id IN (SELECT message_id FROM sub)
), conv AS (
    INSERT INTO messaging.conversations
        (id, target_kind, target_name, started_by, last_position, pending_deliveries,
         oldest_pending_at)
    SELECT conversation_id, kind, name, principal, 2, 1, now() FROM go
    RETURNING id
), inbox AS (
    INSERT INTO messaging.inboxes (id, conversation_id, principal)
    SELECT go.inbox_id, conv.id, go.principal FROM go JOIN conv ON conv.id = go.conversation_id
    RETURNING id
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT go.message_id, conv.id, 1, inbox.id, 'to_target', go.principal, go.channel,
           go.text, CAST(go.parts AS jsonb)
    FROM go JOIN conv ON conv.id = go.conversation_id JOIN inbox ON inbox.id = go.inbox_id
    RETURNING id, conversation_id
), dlv AS (
    INSERT INTO messaging.deliveries (id, conversation_id, position, kind, message_id)
    SELECT go.delivery_id, msg.conversation_id, 2, 'message', msg.id
    FROM go JOIN msg ON msg.id = go.message_id
    RETURNING id
), woken AS (
    SELECT count(pg_notify('messaging_turns', key)) AS n
    FROM (SELECT DISTINCT go.target_key AS key FROM go JOIN dlv ON dlv.id = go.delivery_id) k
)
SELECT i.n,
       EXISTS (SELECT 1 FROM target WHERE target.n = i.n) AS target_exists,
       EXISTS (SELECT 1 FROM ok WHERE ok.n = i.n) AS allowed,
       EXISTS (SELECT 1 FROM dlv WHERE dlv.id = i.delivery_id) AS stored,
       (SELECT n FROM woken) AS woken
FROM input i
ORDER BY i.n
"""
)

# Continue a conversation through an inbox bound to the caller. The UPDATE takes the
# conversation's row lock, so positions follow commit order.
_SEND_CONTINUE = fixed_sql(
    """
WITH inbox AS (
    SELECT i.id, i.conversation_id, t.kind || ':' || t.name AS target, t.free_text_ask
    FROM messaging.inboxes i
    JOIN messaging.conversations c ON c.id = i.conversation_id
    JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
    WHERE i.id = :inbox_id AND i.principal = :principal
), ok AS (
    SELECT * FROM inbox WHERE NOT (:refuse AND free_text_ask IS FALSE)
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT :principal, :submission_id, :request_hash, CAST(:message_id AS uuid),
           ok.conversation_id, ok.id
    FROM ok WHERE :submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT * FROM ok WHERE :submission_id = '' OR EXISTS (SELECT 1 FROM sub)
), conv AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + 2,
        pending_deliveries = c.pending_deliveries + 1,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM go WHERE c.id = go.conversation_id
    RETURNING c.id, c.last_position, c.active_turn_id, c.target_kind, c.target_name
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT CAST(:message_id AS uuid), conv.id, conv.last_position - 1, :inbox_id, 'to_target',
           :principal, :channel, :text, :parts
    FROM conv
    RETURNING id
), dlv AS (
    INSERT INTO messaging.deliveries (id, conversation_id, position, kind, message_id)
    SELECT CAST(:delivery_id AS uuid), conv.id, conv.last_position, 'message', msg.id
    FROM conv, msg
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM inbox) AS found,
       EXISTS (SELECT 1 FROM ok) AS allowed,
       EXISTS (SELECT 1 FROM dlv) AS stored,
       (SELECT conversation_id FROM inbox) AS conversation_id,
       (SELECT target FROM inbox) AS target,
       (SELECT pg_notify('messaging_turns', target_kind || ':' || target_name)
        FROM conv WHERE active_turn_id IS NULL AND EXISTS (SELECT 1 FROM dlv)) AS notified
"""
)

# An agent's message to the conversation's inbox, waking its long-polling readers.
_AGENT_REPLY = fixed_sql(
    """
WITH sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT :principal, :submission_id, :request_hash, CAST(:message_id AS uuid),
           CAST(:conversation_id AS uuid), CAST(:inbox_id AS uuid)
    WHERE :submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT 1 WHERE :submission_id = '' OR EXISTS (SELECT 1 FROM sub)
), conv AS (
    UPDATE messaging.conversations c SET last_position = c.last_position + 1
    FROM go WHERE c.id = CAST(:conversation_id AS uuid)
    RETURNING c.id, c.last_position
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT CAST(:message_id AS uuid), conv.id, conv.last_position, CAST(:inbox_id AS uuid),
           'to_inbox', :principal, 'programmatic', :text, :parts
    FROM conv
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM msg) AS stored,
       CASE WHEN EXISTS (SELECT 1 FROM msg)
            THEN pg_notify('messaging_inbox', CAST(:inbox_id AS text)) END AS notified
"""
)

# EnqueueDelivery as one statement: the retry key is looked up first; a new delivery takes
# the conversation's row lock (so its position follows commit order) and wakes the turn
# claimers if no turn is running. A concurrent twin with the same key makes the INSERT
# fail with a unique violation, which aborts the whole statement: nothing is stored and
# the caller retries, now finding the twin (C10, S6, F13).
# Queue deliveries given as one JSON array of objects (payload in base64), one result
# row per item. Conversations are locked in id order (two batches never wait on each
# other in a cycle); each gets its new positions in one UPDATE, in item order.
_ENQUEUE = fixed_sql(
    """
WITH input AS (
    SELECT * FROM json_to_recordset(CAST(:items AS json)) AS (
        n integer, conversation_id uuid, delivery_id uuid, kind text, text text,
        payload text, attributes jsonb, key text)
), existing AS (
    SELECT i.n, d.id, d.conversation_id <> i.conversation_id AS other_conversation,
           (d.kind, d.text, d.payload) IS DISTINCT FROM
               (i.kind, i.text, decode(i.payload, 'base64')) AS other_content
    FROM input i JOIN messaging.deliveries d ON d.idempotency_key = i.key
), fresh AS (
    SELECT i.*, row_number() OVER (PARTITION BY i.conversation_id ORDER BY i.n) AS k
    FROM input i WHERE i.n NOT IN (SELECT n FROM existing)
), locked AS (
    SELECT c.id FROM messaging.conversations c
    WHERE c.id IN (SELECT conversation_id FROM fresh)
    ORDER BY c.id
    FOR UPDATE
), conv AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + f.added,
        pending_deliveries = c.pending_deliveries + f.added,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM (SELECT conversation_id, count(*) AS added FROM fresh GROUP BY conversation_id) f
    WHERE c.id = f.conversation_id AND c.id IN (SELECT id FROM locked)
    RETURNING c.id, c.last_position - f.added AS base, c.active_turn_id,
              c.target_kind || ':' || c.target_name AS target
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, text, payload, attributes, idempotency_key)
    SELECT f.delivery_id, conv.id, conv.base + f.k, f.kind, f.text,
           decode(f.payload, 'base64'), f.attributes, f.key
    FROM fresh f JOIN conv ON conv.id = f.conversation_id
    RETURNING id
), woken AS (
    SELECT count(pg_notify('messaging_turns', target)) AS n
    FROM (SELECT DISTINCT target FROM conv WHERE active_turn_id IS NULL) k
)
SELECT i.n, e.id AS existing_id, e.other_conversation, e.other_content,
       i.delivery_id IN (SELECT id FROM dlv) AS stored,
       (SELECT n FROM woken) AS woken
FROM input i LEFT JOIN existing e ON e.n = i.n
ORDER BY i.n
"""
)
