-- The messaging service's SQL: every statement of its store, by name (agentworks.server.queries).
-- Parameters are psycopg's %(name)s; `(prepared)` marks the hot statements, which psycopg
-- prepares on a connection after their fifth run there. Concurrency rests on PostgreSQL
-- alone (P3): the conversation row lock orders positions and guards the turn queue,
-- ON CONFLICT deduplicates retries, FOR UPDATE SKIP LOCKED lets replicas claim turns and
-- sweep leases without stepping on each other, and pg_notify (sent at commit) wakes
-- long-polls on every replica.

-- ===================================================================== targets (C1, C8)

-- put_target --
-- Create the target, or give an existing one this owner; a capability given as NULL
-- keeps the stored value.
INSERT INTO messaging.targets AS t (kind, name, owner, free_text_ask, a2a_card)
VALUES (%(kind)s, %(name)s, %(owner)s, %(free_text_ask)s, %(a2a_card)s)
ON CONFLICT (kind, name) DO UPDATE
SET owner = excluded.owner,
    updated_at = now(),
    free_text_ask = coalesce(excluded.free_text_ask, t.free_text_ask),
    a2a_card = coalesce(excluded.a2a_card, t.a2a_card)
RETURNING *;

-- look_alike --
-- A registered target whose name differs from %(name)s only by case (B10): one stored
-- before names had to be lower-case. New names are lower-case, so none can appear
-- between this look-up and the insert that follows it.
SELECT name FROM messaging.targets
WHERE kind = %(kind)s AND lower(name) = lower(%(name)s) AND name <> %(name)s
LIMIT 1;

-- get_target --
SELECT * FROM messaging.targets WHERE kind = %(kind)s AND name = %(name)s;

-- list_targets --
-- %(viewer)s NULL is the operator (every target); else the targets it owns. Keyset on
-- (kind, name), the primary key.
SELECT * FROM messaging.targets
WHERE (CAST(%(viewer)s AS text) IS NULL OR owner = CAST(%(viewer)s AS text))
  AND (CAST(%(after_kind)s AS text) IS NULL
       OR (kind, name) > (CAST(%(after_kind)s AS text), CAST(%(after_name)s AS text)))
ORDER BY kind, name
LIMIT %(limit)s;

-- update_target --
-- A capability given as NULL keeps the stored value.
UPDATE messaging.targets
SET free_text_ask = coalesce(CAST(%(free_text_ask)s AS boolean), free_text_ask),
    a2a_card = coalesce(CAST(%(a2a_card)s AS boolean), a2a_card),
    updated_at = now()
WHERE kind = %(kind)s AND name = %(name)s
RETURNING *;

-- ============================================ sends, replies, retry keys (C2-C6, C9)

-- earlier_receipt (prepared) --
SELECT s.request_hash, s.message_id, s.conversation_id, s.inbox_id, m.position
FROM messaging.submissions s LEFT JOIN messaging.messages m ON m.id = s.message_id
WHERE s.principal = %(principal)s AND s.submission_id = %(submission_id)s;

-- send_new (prepared) --
-- Start conversations: target check, retry key, conversation, inbox, message, delivery,
-- for a batch of sends given as one JSON array of objects (one field per column: one
-- parameter to encode, however many sends); one result row per send, in order.
WITH input AS (
    SELECT * FROM ROWS FROM (
        json_to_recordset(CAST(%(sends)s AS json)) AS (
            kind text, name text, refuse boolean, principal text, submission_id text,
            request_hash text, message_id uuid, conversation_id uuid, inbox_id uuid,
            delivery_id uuid, channel text, text text, parts text, target_key text,
            origin uuid, traceparent text)
    ) WITH ORDINALITY AS i (kind, name, refuse, principal, submission_id, request_hash,
                            message_id, conversation_id, inbox_id, delivery_id, channel,
                            text, parts, target_key, origin, traceparent, n)
), target AS (
    SELECT i.n, t.free_text_ask, t.owner
    FROM input i JOIN messaging.targets t ON t.kind = i.kind AND t.name = i.name
), ok AS (
    SELECT i.* FROM input i JOIN target USING (n)
    WHERE NOT (target.free_text_ask IS FALSE AND (i.refuse OR i.principal <> target.owner))
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
         oldest_pending_at, origin_conversation_id, origin_target_kind, origin_target_name)
    SELECT go.conversation_id, go.kind, go.name, go.principal, 2, 1, now(),
           oc.id, oc.target_kind, oc.target_name
    FROM go LEFT JOIN messaging.conversations oc ON oc.id = go.origin
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
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, traceparent)
    SELECT go.delivery_id, msg.conversation_id, 2, 'message', msg.id, go.traceparent
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
ORDER BY i.n;

-- send_continue (prepared) --
-- Continue a conversation through an inbox bound to the caller (with %(origin)s, one that
-- conversation started, L5). The UPDATE takes the conversation's row lock, so positions
-- follow commit order.
WITH inbox AS (
    SELECT i.id, i.conversation_id, t.kind || ':' || t.name AS target, t.free_text_ask,
           t.owner
    FROM messaging.inboxes i
    JOIN messaging.conversations c ON c.id = i.conversation_id
    JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
    WHERE i.id = %(inbox_id)s AND i.principal = %(principal)s
      AND (CAST(%(origin)s AS uuid) IS NULL OR c.origin_conversation_id = CAST(%(origin)s AS uuid))
), ok AS (
    SELECT * FROM inbox
    WHERE NOT (free_text_ask IS FALSE AND (%(refuse)s OR owner <> %(principal)s))
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT %(principal)s, %(submission_id)s, %(request_hash)s, CAST(%(message_id)s AS uuid),
           ok.conversation_id, ok.id
    FROM ok WHERE %(submission_id)s <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT * FROM ok WHERE %(submission_id)s = '' OR EXISTS (SELECT 1 FROM sub)
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
    SELECT CAST(%(message_id)s AS uuid), conv.id, conv.last_position - 1, %(inbox_id)s, 'to_target',
           %(principal)s, %(channel)s, %(text)s, %(parts)s
    FROM conv
    RETURNING id
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, traceparent)
    SELECT CAST(%(delivery_id)s AS uuid), conv.id, conv.last_position, 'message', msg.id,
           %(traceparent)s
    FROM conv, msg
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM inbox) AS found,
       EXISTS (SELECT 1 FROM ok) AS allowed,
       EXISTS (SELECT 1 FROM dlv) AS stored,
       (SELECT conversation_id FROM inbox) AS conversation_id,
       (SELECT target FROM inbox) AS target,
       (SELECT last_position - 1 FROM conv) AS position,
       (SELECT pg_notify('messaging_turns', target_kind || ':' || target_name)
        FROM conv WHERE active_turn_id IS NULL AND EXISTS (SELECT 1 FROM dlv)) AS notified;

-- agent_reply (prepared) --
-- An agent's message to the conversation's inbox, waking its long-polling readers. When
-- the conversation was started in a turn of another (its origin, L5), the same statement
-- queues the message there as a `conversation_reply` delivery and wakes the origin
-- target's claimers: no reply is stored without its turn. The origin target's switch
-- (C8) off refuses it: nothing is stored (`allowed` false). The origin's row is locked
-- after this conversation's; an origin is always older than what it started, so two
-- replies never lock in a cycle.
WITH origin AS (
    SELECT c.origin_conversation_id AS id, t.free_text_ask,
           t.kind || ':' || t.name AS target
    FROM messaging.conversations c
    JOIN messaging.targets t ON t.kind = c.origin_target_kind AND t.name = c.origin_target_name
    WHERE c.id = CAST(%(conversation_id)s AS uuid)
), ok AS (
    SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM origin WHERE free_text_ask IS FALSE)
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT %(principal)s, %(submission_id)s, %(request_hash)s, CAST(%(message_id)s AS uuid),
           CAST(%(conversation_id)s AS uuid), CAST(%(inbox_id)s AS uuid)
    FROM ok WHERE %(submission_id)s <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT 1 FROM ok WHERE %(submission_id)s = '' OR EXISTS (SELECT 1 FROM sub)
), conv AS (
    UPDATE messaging.conversations c SET last_position = c.last_position + 1
    FROM go WHERE c.id = CAST(%(conversation_id)s AS uuid)
    RETURNING c.id, c.last_position
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT CAST(%(message_id)s AS uuid), conv.id, conv.last_position, CAST(%(inbox_id)s AS uuid),
           'to_inbox', %(principal)s, 'programmatic', %(text)s, %(parts)s
    FROM conv
    RETURNING id
), back AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + 1,
        pending_deliveries = c.pending_deliveries + 1,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM origin WHERE c.id = origin.id AND EXISTS (SELECT 1 FROM msg)
    RETURNING c.id, c.last_position, c.active_turn_id,
              c.target_kind || ':' || c.target_name AS target
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, text, attributes, traceparent)
    SELECT CAST(%(delivery_id)s AS uuid), back.id, back.last_position, 'conversation_reply',
           msg.id, %(reply_text)s, CAST(%(reply_attributes)s AS jsonb), %(traceparent)s
    FROM back, msg
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM msg) AS stored,
       EXISTS (SELECT 1 FROM ok) AS allowed,
       (SELECT target FROM origin) AS origin_target,
       (SELECT last_position FROM conv) AS position,
       CASE WHEN EXISTS (SELECT 1 FROM msg)
            THEN pg_notify('messaging_inbox', CAST(%(inbox_id)s AS text)) END AS notified,
       (SELECT pg_notify('messaging_turns', target)
        FROM back WHERE active_turn_id IS NULL AND EXISTS (SELECT 1 FROM dlv)) AS woken;

-- inbox_target (prepared) --
SELECT i.conversation_id, i.principal, c.target_kind, c.target_name
FROM messaging.inboxes i JOIN messaging.conversations c ON c.id = i.conversation_id
WHERE i.id = %(inbox_id)s;

-- inbox_target_and_turn (prepared) --
-- The same with a turn of the caller's, for a reply that completes it: one statement.
SELECT i.conversation_id, i.principal, c.target_kind, c.target_name,
       t.runtime AS turn_runtime, t.conversation_id AS turn_conversation_id,
       t.status AS turn_status, t.lease_expires_at > now() AS turn_live
FROM messaging.inboxes i JOIN messaging.conversations c ON c.id = i.conversation_id
LEFT JOIN messaging.turns t ON t.id = %(turn_id)s
WHERE i.id = %(inbox_id)s;

-- purge_submissions --
DELETE FROM messaging.submissions WHERE created_at < now() - CAST(%(older_than)s AS interval);

-- ====================================================== reads and transcripts (C7, C12)

-- inbox_conversation (prepared) --
SELECT conversation_id FROM messaging.inboxes WHERE id = %(inbox_id)s;

-- read_inbox (prepared) --
SELECT * FROM messaging.messages
WHERE inbox_id = %(inbox_id)s AND direction = 'to_inbox' AND position > %(after)s
ORDER BY position LIMIT %(limit)s;

-- read_own_inbox (prepared) --
-- The first page of a read, with the inbox's principal in the same statement: one row
-- without a message when the page is empty, none when the inbox does not exist.
SELECT i.principal, m.*
FROM messaging.inboxes i
LEFT JOIN LATERAL (
    SELECT * FROM messaging.messages
    WHERE inbox_id = i.id AND direction = 'to_inbox' AND position > %(after)s
    ORDER BY position LIMIT %(limit)s
) m ON true
WHERE i.id = %(inbox_id)s
ORDER BY m.position;

-- read_own_inbox_newest (prepared) --
-- The newest messages of an inbox (returned oldest first), with the inbox's principal as
-- read_own_inbox has it: a backward scan of messages_inbox_read, however long the inbox.
SELECT i.principal, m.*
FROM messaging.inboxes i
LEFT JOIN LATERAL (
    SELECT * FROM messaging.messages
    WHERE inbox_id = i.id AND direction = 'to_inbox'
    ORDER BY position DESC LIMIT %(limit)s
) m ON true
WHERE i.id = %(inbox_id)s
ORDER BY m.position;

-- conversation --
-- Who may see a conversation: its target, the target's owner, the inbox's principal.
SELECT c.target_kind, c.target_name, t.owner, i.principal, i.id
FROM messaging.conversations c
JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
JOIN messaging.inboxes i ON i.conversation_id = c.id
WHERE c.id = %(conversation_id)s;

-- transcript_messages --
SELECT * FROM messaging.messages
WHERE conversation_id = %(conversation_id)s AND position > %(after)s
ORDER BY position LIMIT %(limit)s;

-- transcript_deliveries --
-- With why the delivery's turn failed (L12); the service shows it to whom it may (A3).
SELECT d.*, coalesce(t.error, '') AS turn_error
FROM messaging.deliveries d
LEFT JOIN messaging.turns t ON t.id = d.turn_id
WHERE d.conversation_id = %(conversation_id)s AND d.position > %(after)s
ORDER BY d.position LIMIT %(limit)s;

-- transcript_messages_newest --
SELECT * FROM (
    SELECT * FROM messaging.messages WHERE conversation_id = %(conversation_id)s
    ORDER BY position DESC LIMIT %(limit)s
) m ORDER BY position;

-- transcript_deliveries_newest --
SELECT * FROM (
    SELECT d.*, coalesce(t.error, '') AS turn_error
    FROM messaging.deliveries d
    LEFT JOIN messaging.turns t ON t.id = d.turn_id
    WHERE d.conversation_id = %(conversation_id)s
    ORDER BY d.position DESC LIMIT %(limit)s
) d ORDER BY position;

-- messages_by_id --
SELECT * FROM messaging.messages WHERE id = ANY(CAST(%(message_ids)s AS uuid[]));

-- ========================================================== listing conversations (V1)

-- list_conversations --
-- %(viewer)s NULL is the operator (every conversation); else the viewer's inboxes and the
-- conversations of the targets it owns. %(since)s NULL lists all, else only conversations
-- with messages after it, counting them.
SELECT c.id, c.target_kind, c.target_name, c.started_by, c.created_at, c.last_position,
    i.id AS inbox_id, i.principal,
    (SELECT count(*) FROM messaging.messages m WHERE m.conversation_id = c.id)
        AS message_count,
    CASE WHEN CAST(%(since)s AS timestamptz) IS NULL THEN 0 ELSE
        (SELECT count(*) FROM messaging.messages m
         WHERE m.conversation_id = c.id AND m.created_at > CAST(%(since)s AS timestamptz))
    END AS new_messages,
    lm.id AS m_id, lm.position AS m_position, lm.inbox_id AS m_inbox_id,
    lm.direction AS m_direction, lm.sender AS m_sender, lm.text AS m_text,
    lm.parts AS m_parts, lm.created_at AS m_created_at
FROM messaging.conversations c
JOIN messaging.inboxes i ON i.conversation_id = c.id
LEFT JOIN LATERAL (
    SELECT * FROM messaging.messages m WHERE m.conversation_id = c.id
    ORDER BY m.position DESC LIMIT 1
) lm ON true
WHERE (CAST(%(viewer)s AS text) IS NULL OR i.principal = CAST(%(viewer)s AS text)
       OR (c.target_kind, c.target_name) IN (
           SELECT t.kind, t.name FROM messaging.targets t WHERE t.owner = CAST(%(viewer)s AS text)))
  AND (CAST(%(kind)s AS text) IS NULL
       OR (c.target_kind = CAST(%(kind)s AS text) AND c.target_name = CAST(%(name)s AS text)))
  AND (CAST(%(after_at)s AS timestamptz) IS NULL
       OR (c.created_at, c.id) < (CAST(%(after_at)s AS timestamptz), CAST(%(after_id)s AS uuid)))
  AND (CAST(%(since)s AS timestamptz) IS NULL OR EXISTS (
       SELECT 1 FROM messaging.messages m
       WHERE m.conversation_id = c.id AND m.created_at > CAST(%(since)s AS timestamptz)))
ORDER BY c.created_at DESC, c.id DESC
LIMIT %(limit)s;

-- now --
-- The database's time, read in the listing's transaction.
SELECT now() AS now;

-- ================================================ the turn queue (C5, C10, C11, B9)

-- claim_turn_of_target (prepared) --
-- A claim is one statement in autocommit: the first claimable conversation of the
-- target in fair order (`turn_at`, set when it became claimable: round the callers, one
-- conversation each, migrations/0005_fair_turns.sql; then by age), an ordered scan of the
-- partial index `conversations_claimable` stopping at the first row nobody else holds; a
-- new turn, the conversation taken, its pending deliveries moved into the turn, each
-- with its message; one row per delivery. `more` says whether another conversation of
-- the target is claimable (then one more idle claimer is woken: a single NOTIFY can
-- stand for several new turns).
WITH conv AS (
    SELECT id, target_kind, target_name FROM messaging.conversations
    WHERE target_kind = %(kind)s AND target_name = %(name)s
      AND pending_deliveries > 0 AND active_turn_id IS NULL
    ORDER BY turn_at, oldest_pending_at LIMIT 1
    FOR UPDATE SKIP LOCKED
), turn AS (
    INSERT INTO messaging.turns (id, conversation_id, runtime, status, lease_expires_at)
    SELECT %(turn_id)s, conv.id, %(runtime)s, 'active', now() + CAST(%(lease)s AS interval) FROM conv
    RETURNING id, conversation_id, lease_expires_at
), dlv AS (
    -- The conversation as a value (an InitPlan), not a join: a generic plan made while
    -- deliveries was small must still look its deliveries up by `deliveries_pending`'s
    -- key, not walk every pending delivery of every conversation (a backlog, B9).
    UPDATE messaging.deliveries d SET status = 'in_turn', turn_id = (SELECT id FROM turn)
    WHERE d.conversation_id = (SELECT conversation_id FROM turn) AND d.status = 'pending'
    RETURNING d.id, d.conversation_id, d.position, d.kind, d.status, d.text, d.payload,
              d.attributes, d.turn_id, d.created_at, d.message_id, d.traceparent
), took AS (
    -- What it took is subtracted, not zeroed: a delivery stored after this statement's
    -- snapshot (its send committed before the lock above, which then saw the newer row)
    -- is not in `dlv`, so it stays pending and counted, and the next claim takes it.
    UPDATE messaging.conversations c
    SET pending_deliveries = c.pending_deliveries - (SELECT count(*) FROM dlv),
        oldest_pending_at = CASE WHEN c.pending_deliveries > (SELECT count(*) FROM dlv)
                                 THEN c.oldest_pending_at END,
        active_turn_id = turn.id
    FROM turn WHERE c.id = turn.conversation_id
    RETURNING c.id
)
SELECT conv.id AS claimed_conversation_id, conv.target_kind, conv.target_name,
       turn.lease_expires_at,
       (SELECT i.id FROM messaging.inboxes i WHERE i.conversation_id = conv.id) AS reply_inbox,
       EXISTS (SELECT 1 FROM messaging.conversations o
               WHERE o.target_kind = %(kind)s AND o.target_name = %(name)s
                 AND o.pending_deliveries > 0 AND o.active_turn_id IS NULL
                 AND o.id <> conv.id) AS more,
       (SELECT count(*) FROM took) AS took,
       dlv.*,
       m.conversation_id AS m_conversation_id, m.inbox_id AS m_inbox_id,
       m.position AS m_position, m.direction AS m_direction,
       m.sender AS m_sender, m.text AS m_text, m.parts AS m_parts,
       m.created_at AS m_created_at
FROM conv JOIN turn ON turn.conversation_id = conv.id
LEFT JOIN dlv ON true
LEFT JOIN messaging.messages m ON m.id = dlv.message_id
ORDER BY dlv.position;

-- claim_turn_of_targets (prepared) --
-- claim_turn_of_target for any of several targets (%(kinds)s and %(names)s pairwise).
-- Kept apart from the one-target claim (most runtimes serve one target), measured with
-- generic plans: one target's claim with one caller's backlog queued reads 53 blocks in
-- 0.6 ms at 8,000 conversations as at 2,000 (an ordered scan that stops at its first
-- row); this statement given that one target reads 92 blocks at 2,000 and 264 (4.3 ms) at
-- 8,000: the IN list cannot stop early, so it sorts every claimable conversation.
WITH conv AS (
    SELECT id, target_kind, target_name FROM messaging.conversations
    WHERE (target_kind, target_name) IN (
        SELECT kind, name FROM unnest(CAST(%(kinds)s AS text[]), CAST(%(names)s AS text[]))
            AS k (kind, name))
      AND pending_deliveries > 0 AND active_turn_id IS NULL
    ORDER BY turn_at, oldest_pending_at LIMIT 1
    FOR UPDATE SKIP LOCKED
), turn AS (
    INSERT INTO messaging.turns (id, conversation_id, runtime, status, lease_expires_at)
    SELECT %(turn_id)s, conv.id, %(runtime)s, 'active', now() + CAST(%(lease)s AS interval) FROM conv
    RETURNING id, conversation_id, lease_expires_at
), dlv AS (
    -- The conversation as a value (an InitPlan), not a join: a generic plan made while
    -- deliveries was small must still look its deliveries up by `deliveries_pending`'s
    -- key, not walk every pending delivery of every conversation (a backlog, B9).
    UPDATE messaging.deliveries d SET status = 'in_turn', turn_id = (SELECT id FROM turn)
    WHERE d.conversation_id = (SELECT conversation_id FROM turn) AND d.status = 'pending'
    RETURNING d.id, d.conversation_id, d.position, d.kind, d.status, d.text, d.payload,
              d.attributes, d.turn_id, d.created_at, d.message_id, d.traceparent
), took AS (
    -- What it took is subtracted, not zeroed: a delivery stored after this statement's
    -- snapshot (its send committed before the lock above, which then saw the newer row)
    -- is not in `dlv`, so it stays pending and counted, and the next claim takes it.
    UPDATE messaging.conversations c
    SET pending_deliveries = c.pending_deliveries - (SELECT count(*) FROM dlv),
        oldest_pending_at = CASE WHEN c.pending_deliveries > (SELECT count(*) FROM dlv)
                                 THEN c.oldest_pending_at END,
        active_turn_id = turn.id
    FROM turn WHERE c.id = turn.conversation_id
    RETURNING c.id
)
SELECT conv.id AS claimed_conversation_id, conv.target_kind, conv.target_name,
       turn.lease_expires_at,
       (SELECT i.id FROM messaging.inboxes i WHERE i.conversation_id = conv.id) AS reply_inbox,
       EXISTS (SELECT 1 FROM messaging.conversations o
               WHERE (o.target_kind, o.target_name) IN (
        SELECT kind, name FROM unnest(CAST(%(kinds)s AS text[]), CAST(%(names)s AS text[]))
            AS k (kind, name))
                 AND o.pending_deliveries > 0 AND o.active_turn_id IS NULL
                 AND o.id <> conv.id) AS more,
       (SELECT count(*) FROM took) AS took,
       dlv.*,
       m.conversation_id AS m_conversation_id, m.inbox_id AS m_inbox_id,
       m.position AS m_position, m.direction AS m_direction,
       m.sender AS m_sender, m.text AS m_text, m.parts AS m_parts,
       m.created_at AS m_created_at
FROM conv JOIN turn ON turn.conversation_id = conv.id
LEFT JOIN dlv ON true
LEFT JOIN messaging.messages m ON m.id = dlv.message_id
ORDER BY dlv.position;

-- turn_lease (prepared) --
SELECT runtime, conversation_id, status, lease_expires_at > now() AS live
FROM messaging.turns WHERE id = %(turn_id)s;

-- extend_lease --
UPDATE messaging.turns SET lease_expires_at = now() + CAST(%(lease)s AS interval)
WHERE id = %(turn_id)s
RETURNING lease_expires_at;

-- lock_turn --
SELECT * FROM messaging.turns WHERE id = %(turn_id)s FOR UPDATE;

-- complete_turn (prepared) --
-- End one runtime's active turn in one statement (autocommit): the turn, its deliveries,
-- its conversation freed (waking the target's claimers when deliveries came meanwhile).
-- The row answers what the turn was, so a refusal can say why.
WITH t AS (
    SELECT id, runtime, status FROM messaging.turns WHERE id = %(turn_id)s FOR UPDATE
), ended AS (
    UPDATE messaging.turns tu SET status = %(status)s, ended_at = now(), error = %(error)s
    FROM t WHERE tu.id = t.id AND t.runtime = %(runtime)s AND t.status = 'active'
    RETURNING tu.id
), dlv AS (
    UPDATE messaging.deliveries SET status = %(delivery_status)s
    WHERE turn_id IN (SELECT id FROM ended)
), freed AS (
    UPDATE messaging.conversations SET active_turn_id = NULL
    WHERE active_turn_id IN (SELECT id FROM ended)
    RETURNING target_kind || ':' || target_name AS target, pending_deliveries
)
SELECT t.runtime, t.status, EXISTS (SELECT 1 FROM ended) AS ended,
       (SELECT count(pg_notify('messaging_turns', target)) FROM freed
        WHERE pending_deliveries > 0) AS woken
FROM t;

-- end_turns --
UPDATE messaging.turns SET status = %(status)s, ended_at = now()
WHERE id = ANY(CAST(%(turn_ids)s AS uuid[]));

-- end_deliveries --
UPDATE messaging.deliveries SET status = %(status)s
WHERE turn_id = ANY(CAST(%(turn_ids)s AS uuid[]));

-- free_conversations --
-- Free the turns' conversations; those with deliveries that came meanwhile can be
-- claimed again, so their target's claimers are woken (at commit).
WITH freed AS (
    UPDATE messaging.conversations SET active_turn_id = NULL
    WHERE active_turn_id = ANY(CAST(%(turn_ids)s AS uuid[]))
    RETURNING target_kind || ':' || target_name AS target, pending_deliveries
)
SELECT count(pg_notify('messaging_turns', target)) AS woken
FROM (SELECT DISTINCT target FROM freed WHERE pending_deliveries > 0) k;

-- enqueue_deliveries (prepared) --
-- Queue deliveries given as one JSON array of objects (payload in base64), one result
-- row per item. The retry keys are looked up first. Conversations are locked in id order
-- (two batches never wait on each other in a cycle); each gets its new positions in one
-- UPDATE, in item order (so positions follow commit order), and the claimers of a target
-- with no turn running are woken. A concurrent twin with the same key makes the INSERT
-- fail with a unique violation, which aborts the whole statement: nothing is stored and
-- the caller retries, now finding the twin (C10, S6, F13).
WITH input AS (
    SELECT * FROM json_to_recordset(CAST(%(items)s AS json)) AS (
        n integer, conversation_id uuid, delivery_id uuid, kind text, text text,
        payload text, attributes jsonb, key text, traceparent text)
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
        (id, conversation_id, position, kind, text, payload, attributes, idempotency_key,
         traceparent)
    SELECT f.delivery_id, conv.id, conv.base + f.k, f.kind, f.text,
           decode(f.payload, 'base64'), f.attributes, f.key, f.traceparent
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
ORDER BY i.n;

-- turn_queue --
-- Per registered target: queued turns, the oldest one's age, active turns (the gauges of
-- metrics.py). Only the live parts of the tables are read, through partial indexes:
-- `conversations_claimable` (pending work, no turn) and `turns_active_lease` (active
-- turns, each joined to its conversation by primary key); message and delivery history
-- is never scanned. The constants are written into the text for those indexes to match.
SELECT t.kind, t.name,
       coalesce(queued.n, 0) AS queued,
       coalesce(EXTRACT(epoch FROM now() - queued.oldest), 0) AS age,
       coalesce(active.n, 0) AS active
FROM messaging.targets t
LEFT JOIN (
    SELECT target_kind, target_name, count(*) AS n, min(oldest_pending_at) AS oldest
    FROM messaging.conversations
    WHERE pending_deliveries > 0 AND active_turn_id IS NULL
    GROUP BY target_kind, target_name
) queued ON queued.target_kind = t.kind AND queued.target_name = t.name
LEFT JOIN (
    SELECT c.target_kind, c.target_name, count(*) AS n
    FROM messaging.turns tu JOIN messaging.conversations c ON c.id = tu.conversation_id
    WHERE tu.status = 'active'
    GROUP BY c.target_kind, c.target_name
) active ON active.target_kind = t.kind AND active.target_name = t.name;

-- expired_turns --
SELECT id FROM messaging.turns
WHERE status = 'active' AND lease_expires_at < now()
LIMIT %(batch)s
FOR UPDATE SKIP LOCKED;

