-- The scheduler's SQL: every statement of its store, by name (agentworks.server.queries).
-- Parameters are psycopg's %(name)s. Firing claims in one short transaction and records
-- in another, with no transaction open while messaging is called (store/firing.py);
-- session-level advisory locks mark what a replica is delivering.

-- ================================================================= shared

-- take_turns --
-- Creates of one kind for one conversation take turns (a transaction-scoped lock), so a
-- limit is exact under concurrency and across replicas, and a retry finds its twin.
SELECT pg_advisory_xact_lock(hashtext(%(key)s));

-- wait_for_delivery --
-- Wait (in this transaction) until no replica is delivering the row; until the
-- transaction ends, no replica starts to (see store/firing.py).
SELECT pg_advisory_xact_lock(%(lock)s, hashtext(%(row_id)s));

-- unlock_all --
-- Release a session's advisory locks (firing, webhook events) before it goes back.
SELECT pg_advisory_unlock_all();

-- now --
SELECT now();

-- ============================================================ wake-ups (S1)

-- wake_up_by_key --
SELECT * FROM scheduler.wake_ups
WHERE created_by = %(created_by)s AND submission_id = %(submission_id)s;

-- pending_wake_ups --
SELECT count(*) FROM scheduler.wake_ups
WHERE conversation_id = %(conversation_id)s AND status = 'pending';

-- create_wake_up --
-- Due at %(due_at)s, or (NULL) %(delay)s from the database clock.
INSERT INTO scheduler.wake_ups
    (id, conversation_id, product, note, due_at, created_by, submission_id, request_hash)
VALUES (%(id)s, %(conversation_id)s, %(product)s, %(note)s,
        coalesce(CAST(%(due_at)s AS timestamptz), now() + CAST(%(delay)s AS interval)),
        %(created_by)s, %(submission_id)s, %(request_hash)s)
RETURNING *;

-- get_wake_up --
SELECT * FROM scheduler.wake_ups WHERE id = %(id)s;

-- change_pending_wake_up --
-- Cancel (%(cancel)s) or reschedule a pending wake-up to %(due_at)s, or (NULL) %(delay)s
-- from the database clock.
UPDATE scheduler.wake_ups
SET updated_at = now(),
    status = CASE WHEN %(cancel)s THEN 'cancelled' ELSE status END,
    due_at = CASE WHEN %(cancel)s THEN due_at
                  ELSE coalesce(CAST(%(due_at)s AS timestamptz),
                                now() + CAST(%(delay)s AS interval)) END
WHERE id = %(id)s AND status = 'pending'
RETURNING *;

-- list_wake_ups --
-- Past the cursor %(after)s in creation order, of one conversation and one product when
-- given (NULL, ''), that %(principal)s may see (NULL: everyone): its own and those of
-- %(products)s.
SELECT * FROM scheduler.wake_ups
WHERE seq > %(after)s
  AND (CAST(%(conversation_id)s AS uuid) IS NULL
       OR conversation_id = CAST(%(conversation_id)s AS uuid))
  AND (CAST(%(product)s AS text) = '' OR product = CAST(%(product)s AS text))
  AND (CAST(%(principal)s AS text) IS NULL OR created_by = CAST(%(principal)s AS text)
       OR product = ANY(CAST(%(products)s AS text[])))
  AND (%(include_finished)s OR status = 'pending')
ORDER BY seq
LIMIT %(limit)s;

-- purge_finished_wake_ups --
DELETE FROM scheduler.wake_ups
WHERE status <> 'pending' AND updated_at < now() - CAST(%(older_than)s AS interval);

-- ===================================================== recurring schedules (S4)

-- schedule_by_key --
SELECT * FROM scheduler.schedules
WHERE created_by = %(created_by)s AND submission_id = %(submission_id)s;

-- schedules_of_conversation --
SELECT count(*) FROM scheduler.schedules WHERE conversation_id = %(conversation_id)s;

-- create_schedule --
INSERT INTO scheduler.schedules
    (id, name, conversation_id, product, prompt, cron, interval_seconds, time_zone,
     anchor_at, next_fire_at, paused, created_by, submission_id, request_hash)
VALUES (%(id)s, %(name)s, %(conversation_id)s, %(product)s, %(prompt)s, %(cron)s,
        %(interval_seconds)s, %(time_zone)s, %(anchor_at)s, %(next_fire_at)s, %(paused)s,
        %(created_by)s, %(submission_id)s, %(request_hash)s)
RETURNING *;

-- get_schedule --
SELECT * FROM scheduler.schedules WHERE id = %(id)s;

-- lock_schedule --
SELECT * FROM scheduler.schedules WHERE id = %(id)s FOR UPDATE;

-- save_schedule --
-- A locked schedule's settable columns, the unchanged ones as they were.
UPDATE scheduler.schedules
SET name = %(name)s, prompt = %(prompt)s, cron = %(cron)s,
    interval_seconds = %(interval_seconds)s, time_zone = %(time_zone)s,
    anchor_at = %(anchor_at)s, next_fire_at = %(next_fire_at)s, paused = %(paused)s,
    updated_at = now()
WHERE id = %(id)s
RETURNING *;

-- delete_schedule --
DELETE FROM scheduler.schedules WHERE id = %(id)s;

-- list_schedules --
SELECT * FROM scheduler.schedules
WHERE seq > %(after)s
  AND (CAST(%(conversation_id)s AS uuid) IS NULL
       OR conversation_id = CAST(%(conversation_id)s AS uuid))
  AND (CAST(%(product)s AS text) = '' OR product = CAST(%(product)s AS text))
  AND (CAST(%(principal)s AS text) IS NULL OR created_by = CAST(%(principal)s AS text)
       OR product = ANY(CAST(%(products)s AS text[])))
ORDER BY seq
LIMIT %(limit)s;

-- ====================================================== pauses (S3)

-- close_gate --
-- Firing holds the gate (an advisory lock) shared from its claim until it has recorded
-- what it delivered; this takes it exclusively, for the transaction.
SELECT pg_advisory_xact_lock(%(gate)s, 0);

-- touch_gate --
-- Waits for a replica of an earlier version still firing in one transaction holding the
-- gate row FOR SHARE.
UPDATE scheduler.pause_gate SET changed_at = now();

-- add_pause --
INSERT INTO scheduler.pauses (product, reason, paused_by)
VALUES (%(product)s, %(reason)s, %(paused_by)s)
ON CONFLICT (product) DO NOTHING;

-- remove_pause --
DELETE FROM scheduler.pauses WHERE product = %(product)s;

-- pauses --
SELECT * FROM scheduler.pauses ORDER BY product;

-- ====================================================== webhooks (S5)

-- webhook_by_key --
SELECT * FROM scheduler.webhooks
WHERE created_by = %(created_by)s AND submission_id = %(submission_id)s;

-- webhooks_of_conversation --
SELECT count(*) FROM scheduler.webhooks WHERE conversation_id = %(conversation_id)s;

-- create_webhook --
INSERT INTO scheduler.webhooks
    (id, name, conversation_id, product, salt, secret_fingerprint, created_by,
     submission_id, request_hash)
VALUES (%(id)s, %(name)s, %(conversation_id)s, %(product)s, %(salt)s,
        %(secret_fingerprint)s, %(created_by)s, %(submission_id)s, %(request_hash)s)
RETURNING *;

-- get_webhook --
SELECT * FROM scheduler.webhooks WHERE id = %(id)s;

-- rotate_webhook_secret --
UPDATE scheduler.webhooks
SET salt = %(salt)s, secret_fingerprint = %(secret_fingerprint)s, secret_rotated_at = now()
WHERE id = %(id)s
RETURNING *;

-- delete_webhook --
DELETE FROM scheduler.webhooks WHERE id = %(id)s;

-- list_webhooks --
SELECT * FROM scheduler.webhooks
WHERE seq > %(after)s
  AND (CAST(%(conversation_id)s AS uuid) IS NULL
       OR conversation_id = CAST(%(conversation_id)s AS uuid))
  AND (CAST(%(product)s AS text) = '' OR product = CAST(%(product)s AS text))
  AND (CAST(%(principal)s AS text) IS NULL OR created_by = CAST(%(principal)s AS text)
       OR product = ANY(CAST(%(products)s AS text[])))
ORDER BY seq
LIMIT %(limit)s;

-- lock_webhook_event --
-- One of an event's session-level locks (its delivery id, its signature), held while it
-- is delivered.
SELECT pg_advisory_lock(%(lock)s, hashtext(%(key)s));

-- earlier_receipt --
SELECT delivery_key, received_at FROM scheduler.webhook_receipts
WHERE webhook_id = %(webhook_id)s
  AND (delivery_key = %(delivery_key)s OR signature = %(signature)s);

-- add_receipt --
INSERT INTO scheduler.webhook_receipts
    (webhook_id, delivery_key, signature, body_sha256, delivery_id)
VALUES (%(webhook_id)s, %(delivery_key)s, %(signature)s, %(body_sha256)s, %(delivery_id)s)
ON CONFLICT DO NOTHING;

-- purge_webhook_receipts --
DELETE FROM scheduler.webhook_receipts
WHERE received_at < now() - CAST(%(older_than)s AS interval);

-- ============================================================ firing (S6)

-- hold_gate --
-- The pause gate, shared (session-level: held until the batch is recorded).
SELECT pg_advisory_lock_shared(%(gate)s, 0);

-- claim_due_wake_ups --
-- Candidates first, bounded (%(window)s), in due order, row-locked (a row a concurrent
-- claim or edit holds is skipped); then the advisory lock, tried only on them and only
-- until %(limit)s are taken. A lock tried in the scan's own WHERE would be taken for
-- every due row before the sort and the LIMIT: a backlog would fill the server's shared
-- lock table. The rows returned are the ones FOR UPDATE locked: their newest version.
WITH candidates AS MATERIALIZED (
    SELECT * FROM scheduler.wake_ups w
    WHERE w.status = 'pending' AND w.due_at <= %(now)s
      AND NOT EXISTS (SELECT 1 FROM scheduler.pauses p
                  WHERE p.product = '' OR p.product = w.product
                     OR p.product = split_part(w.product, ':', 1) || ':*')
    ORDER BY w.due_at
    LIMIT %(window)s
    FOR UPDATE SKIP LOCKED
), claimed AS MATERIALIZED (
    SELECT * FROM candidates
    WHERE pg_try_advisory_lock(%(lock)s, hashtext(CAST(candidates.id AS text)))
    LIMIT %(limit)s
)
SELECT * FROM claimed ORDER BY claimed.due_at;

-- claim_due_schedules --
-- claim_due_wake_ups for schedules with a due occurrence, not paused.
WITH candidates AS MATERIALIZED (
    SELECT * FROM scheduler.schedules s
    WHERE NOT s.paused AND s.next_fire_at <= %(now)s
      AND NOT EXISTS (SELECT 1 FROM scheduler.pauses p
                  WHERE p.product = '' OR p.product = s.product
                     OR p.product = split_part(s.product, ':', 1) || ':*')
    ORDER BY s.next_fire_at
    LIMIT %(window)s
    FOR UPDATE SKIP LOCKED
), claimed AS MATERIALIZED (
    SELECT * FROM candidates
    WHERE pg_try_advisory_lock(%(lock)s, hashtext(CAST(candidates.id AS text)))
    LIMIT %(limit)s
)
SELECT * FROM claimed ORDER BY claimed.next_fire_at;

-- wake_ups_fired --
-- A batch's delivered wake-ups, in one statement over arrays.
UPDATE scheduler.wake_ups w
SET status = 'fired', fired_at = clock_timestamp(), updated_at = clock_timestamp(),
    delivery_id = b.delivery_id, late_seconds = b.late_seconds
FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(deliveries)s AS uuid[]),
            CAST(%(lates)s AS float8[]))
    AS b (id, delivery_id, late_seconds)
WHERE w.id = b.id;

-- wake_up_failed --
-- One refused wake-up (run for each, the rare failures of a batch).
UPDATE scheduler.wake_ups
SET status = 'failed', error = %(b_error)s, updated_at = clock_timestamp()
WHERE id = %(b_id)s;

-- schedules_fired --
UPDATE scheduler.schedules s
SET next_fire_at = b.next_fire_at, last_fired_at = clock_timestamp(),
    fire_count = s.fire_count + 1, last_error = NULL
FROM unnest(CAST(%(ids)s AS uuid[]), CAST(%(nexts)s AS timestamptz[])) AS b (id, next_fire_at)
WHERE s.id = b.id;

-- schedule_failed --
UPDATE scheduler.schedules SET next_fire_at = %(b_next)s, last_error = %(b_error)s
WHERE id = %(b_id)s;

-- ============================================================ gauges (metrics.py)

-- timer_counts --
-- Due wake-ups and due schedule occurrences, summarised per kind. Only what is due is
-- read, through the partial indexes wake_ups_due (pending, by due time) and
-- schedules_due (not paused, by next fire time); fired and cancelled history is never
-- scanned. OFFSET 0 keeps each subquery whole: `held` is computed once per row.
SELECT 'wake_up' AS kind, count(*) FILTER (WHERE NOT due_wake_ups.held) AS due,
       count(*) FILTER (WHERE due_wake_ups.held) AS held,
       coalesce(EXTRACT(epoch FROM now() - (min(due_wake_ups.due_at)
                                            FILTER (WHERE NOT due_wake_ups.held))), 0)
           AS overdue
FROM (SELECT w.due_at AS due_at, EXISTS (SELECT 1 FROM scheduler.pauses p
                  WHERE p.product = '' OR p.product = w.product
                     OR p.product = split_part(w.product, ':', 1) || ':*') AS held
      FROM scheduler.wake_ups w
      WHERE w.status = 'pending' AND w.due_at <= now()
      OFFSET 0) AS due_wake_ups
UNION ALL
SELECT 'schedule' AS kind, count(*) FILTER (WHERE NOT due_schedules.held) AS due,
       count(*) FILTER (WHERE due_schedules.held) AS held,
       coalesce(EXTRACT(epoch FROM now() - (min(due_schedules.due_at)
                                            FILTER (WHERE NOT due_schedules.held))), 0)
           AS overdue
FROM (SELECT s.next_fire_at AS due_at, EXISTS (SELECT 1 FROM scheduler.pauses p
                  WHERE p.product = '' OR p.product = s.product
                     OR p.product = split_part(s.product, ':', 1) || ':*') AS held
      FROM scheduler.schedules s
      WHERE NOT s.paused AND s.next_fire_at <= now()
      OFFSET 0) AS due_schedules;
