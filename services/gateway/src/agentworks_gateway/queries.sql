-- The gateway's own SQL (API tokens, runtime credentials, console sessions), by name
-- (agentworks.server.queries). Parameters are psycopg's %(name)s; `(prepared)` marks
-- the statements every request runs (a token's or a session's look-up).

-- ping --
SELECT 1;

-- ============================================================= tokens and credentials

-- insert_token --
-- A new token, or a runtime credential (with %(targets)s): its hash only.
INSERT INTO gateway.api_tokens
    (token_id, token_hash, principal, roles, label, created_by, targets, expires_at)
VALUES (%(token_id)s, %(token_hash)s, %(principal)s, %(roles)s, %(label)s, %(created_by)s,
        %(targets)s, %(expires_at)s)
RETURNING token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at;

-- find_token_by_hash (prepared) --
SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at
FROM gateway.api_tokens WHERE token_hash = %(token_hash)s;

-- list_tokens --
-- API tokens, or with %(runtime)s runtime credentials, oldest first; revoked ones with
-- %(include_revoked)s.
SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at
FROM gateway.api_tokens
WHERE (targets IS NOT NULL) = %(runtime)s
  AND (%(include_revoked)s OR revoked_at IS NULL)
ORDER BY created_at, token_id;

-- token_seen (prepared) --
-- A runtime just exchanged this credential (its last seen, V1).
UPDATE gateway.api_tokens SET last_seen_at = now() WHERE token_id = %(token_id)s;

-- runtime_page --
-- Runtime credentials oldest first after the key (%(after_at)s, %(after_id)s): one
-- keyset page, never OFFSET.
SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at
FROM gateway.api_tokens
WHERE targets IS NOT NULL
  AND (%(include_revoked)s OR revoked_at IS NULL)
  AND (CAST(%(after_at)s AS timestamptz) IS NULL
       OR (created_at, token_id) > (CAST(%(after_at)s AS timestamptz), CAST(%(after_id)s AS text)))
ORDER BY created_at, token_id
LIMIT %(limit)s;

-- tokens_by_ids --
-- The tokens behind a replica's open event streams, checked again together (A1).
SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at
FROM gateway.api_tokens WHERE token_id = ANY(%(token_ids)s);

-- get_token --
SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by,
       targets, expires_at, last_seen_at
FROM gateway.api_tokens WHERE token_id = %(token_id)s;

-- revoke_token --
-- Keeps the first revocation.
UPDATE gateway.api_tokens SET revoked_at = now(), revoked_by = %(revoked_by)s
WHERE token_id = %(token_id)s AND revoked_at IS NULL;

-- ensure_token --
-- Insert or refresh a token by hash (the supervisor's, at start); none returned for a
-- revoked one.
INSERT INTO gateway.api_tokens
    (token_id, token_hash, principal, roles, label, created_by, targets)
VALUES (%(token_id)s, %(token_hash)s, %(principal)s, %(roles)s, %(label)s,
        'service:supervisor', %(targets)s)
ON CONFLICT (token_hash) DO UPDATE
SET principal = excluded.principal, roles = excluded.roles, label = excluded.label,
    targets = excluded.targets
WHERE gateway.api_tokens.revoked_at IS NULL
RETURNING token_id;

-- token_revoked_at --
SELECT revoked_at FROM gateway.api_tokens WHERE token_hash = %(token_hash)s;

-- ========================================================= console sessions (V3)

-- drop_expired_sessions --
DELETE FROM gateway.console_sessions WHERE expires_at < now();

-- insert_session --
INSERT INTO gateway.console_sessions (session_hash, token_id, csrf_token, expires_at)
VALUES (%(session_hash)s, %(token_id)s, %(csrf_token)s, %(expires_at)s);

-- find_session (prepared) --
-- A session and its token (revoked or not): a revoked token ends its sessions on the
-- very next request.
SELECT s.csrf_token, s.expires_at AS session_expires_at, t.token_id, t.label, t.principal,
       t.roles, t.created_by, t.created_at, t.revoked_at, t.revoked_by, t.targets,
       t.expires_at, t.last_seen_at
FROM gateway.console_sessions s JOIN gateway.api_tokens t ON t.token_id = s.token_id
WHERE s.session_hash = %(session_hash)s;

-- delete_session --
DELETE FROM gateway.console_sessions WHERE session_hash = %(session_hash)s;

-- ============================================================= webhooks out (N2)
-- The endpoints tool reads and changes endpoints of kind 'webhook' only; those of kind
-- 'a2a_push' are A2A push configs' (their queries are under A2A push, below).

-- endpoint_insert --
INSERT INTO gateway.webhook_endpoints (endpoint_id, principal, url, description, secret)
VALUES (%(endpoint_id)s, %(principal)s, %(url)s, %(description)s, %(secret)s)
RETURNING endpoint_id, principal, url, description, secret, created_at, secret_rotated_at;

-- feed_insert --
INSERT INTO gateway.webhook_feeds (endpoint_id, source) VALUES (%(endpoint_id)s, %(source)s);

-- endpoint_lock --
-- One principal's registrations one at a time (its cap holds), until the commit.
SELECT pg_advisory_xact_lock(hashtext('gateway.webhook_endpoints:' || %(principal)s));

-- endpoint_count --
-- How many endpoints a principal has (its cap).
SELECT count(*) FROM gateway.webhook_endpoints WHERE principal = %(principal)s AND kind = 'webhook';

-- endpoint_page --
-- A principal's endpoints oldest first after the key (%(after_at)s, %(after_id)s).
SELECT endpoint_id, principal, url, description, secret, created_at, secret_rotated_at
FROM gateway.webhook_endpoints
WHERE principal = %(principal)s AND kind = 'webhook'
  AND (CAST(%(after_at)s AS timestamptz) IS NULL
       OR (created_at, endpoint_id) > (CAST(%(after_at)s AS timestamptz), CAST(%(after_id)s AS text)))
ORDER BY created_at, endpoint_id
LIMIT %(limit)s;

-- endpoint_get --
-- One endpoint of a principal (another's is not found: A3).
SELECT endpoint_id, principal, url, description, secret, created_at, secret_rotated_at
FROM gateway.webhook_endpoints
WHERE endpoint_id = %(endpoint_id)s AND principal = %(principal)s AND kind = 'webhook';

-- endpoint_feeds --
-- The feeds of these endpoints.
SELECT endpoint_id, source, cursor, created_at, leased_by, lease_until, last_error
FROM gateway.webhook_feeds
WHERE endpoint_id = ANY(%(endpoint_ids)s)
ORDER BY endpoint_id, source;

-- endpoint_delete --
DELETE FROM gateway.webhook_endpoints
WHERE endpoint_id = %(endpoint_id)s AND principal = %(principal)s AND kind = 'webhook'
RETURNING endpoint_id;

-- endpoint_rotate --
UPDATE gateway.webhook_endpoints SET secret = %(secret)s, secret_rotated_at = now()
WHERE endpoint_id = %(endpoint_id)s AND principal = %(principal)s AND kind = 'webhook'
RETURNING endpoint_id, principal, url, description, secret, created_at, secret_rotated_at;

-- delivery_insert --
-- A delivery before its first attempt; an event read twice is inserted once.
INSERT INTO gateway.webhook_deliveries
    (delivery_id, endpoint_id, event_type, event_key, payload, give_up_at)
VALUES (%(delivery_id)s, %(endpoint_id)s, %(event_type)s, %(event_key)s, %(payload)s,
        now() + make_interval(secs => %(retry_seconds)s))
ON CONFLICT (delivery_id) DO NOTHING
RETURNING delivery_id;

-- feed_advance --
-- The feed's cursor after what was read, only while this replica holds its lease
-- (no row: the lease is lost, and the transaction is rolled back).
UPDATE gateway.webhook_feeds SET cursor = %(cursor)s, last_error = ''
WHERE endpoint_id = %(endpoint_id)s AND source = %(source)s AND leased_by = %(replica)s
RETURNING endpoint_id;

-- feed_error --
-- Why following a feed failed just now (shown with the endpoint).
UPDATE gateway.webhook_feeds SET last_error = %(error)s
WHERE endpoint_id = %(endpoint_id)s AND source = %(source)s AND leased_by = %(replica)s;

-- feeds_claim --
-- Up to %(limit)s feeds no replica follows (none, or its lease ran out) whose principal
-- still has a usable API token: this replica follows them until its lease ends.
UPDATE gateway.webhook_feeds f
SET leased_by = %(replica)s, lease_until = now() + make_interval(secs => %(lease_seconds)s)
FROM gateway.webhook_endpoints e
WHERE e.endpoint_id = f.endpoint_id
  AND (f.endpoint_id, f.source) IN (
    SELECT c.endpoint_id, c.source
    FROM gateway.webhook_feeds c JOIN gateway.webhook_endpoints ce USING (endpoint_id)
    WHERE (c.lease_until IS NULL OR c.lease_until < now())
      AND EXISTS (
        SELECT 1 FROM gateway.api_tokens t
        WHERE t.principal = ce.principal AND t.targets IS NULL AND t.revoked_at IS NULL
          AND (t.expires_at IS NULL OR t.expires_at > now()))
    ORDER BY c.lease_until NULLS FIRST
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED)
RETURNING f.endpoint_id, f.source, f.cursor, f.created_at, e.principal;

-- feeds_renew --
-- Extend this replica's leases; the feeds it no longer holds, and those whose principal
-- has no usable API token any more (revoked, expired), are not returned.
UPDATE gateway.webhook_feeds f
SET lease_until = now() + make_interval(secs => %(lease_seconds)s)
FROM gateway.webhook_endpoints e
WHERE e.endpoint_id = f.endpoint_id AND f.leased_by = %(replica)s
  AND EXISTS (
    SELECT 1 FROM gateway.api_tokens t
    WHERE t.principal = e.principal AND t.targets IS NULL AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > now()))
RETURNING f.endpoint_id, f.source;

-- feed_release --
UPDATE gateway.webhook_feeds SET leased_by = NULL, lease_until = NULL
WHERE endpoint_id = %(endpoint_id)s AND source = %(source)s AND leased_by = %(replica)s;

-- deliveries_claim --
-- Up to %(limit)s due deliveries for this replica: each attempt counted, and not due
-- again until its lease has passed (another replica retries it only then).
UPDATE gateway.webhook_deliveries d
SET leased_by = %(replica)s, attempts = d.attempts + 1, last_attempt_at = now(),
    next_attempt_at = now() + make_interval(secs => %(lease_seconds)s)
FROM gateway.webhook_endpoints e
WHERE e.endpoint_id = d.endpoint_id
  AND d.delivery_id IN (
    SELECT delivery_id FROM gateway.webhook_deliveries
    WHERE status IN ('pending', 'failing') AND next_attempt_at <= now()
    ORDER BY next_attempt_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING d.delivery_id, d.endpoint_id, d.event_type, d.payload, d.attempts, d.give_up_at,
          e.url, e.secret, e.headers;

-- delivery_delivered --
UPDATE gateway.webhook_deliveries
SET status = 'delivered', delivered_at = now(), last_status = %(http_status)s,
    last_error = '', leased_by = NULL
WHERE delivery_id = %(delivery_id)s AND leased_by = %(replica)s AND attempts = %(attempts)s;

-- delivery_failed --
-- A failed attempt: retried after %(retry_seconds)s, or given up past give_up_at.
UPDATE gateway.webhook_deliveries
SET status = CASE WHEN now() + make_interval(secs => %(retry_seconds)s) > give_up_at
                  THEN 'gave_up' ELSE 'failing' END,
    next_attempt_at = now() + make_interval(secs => %(retry_seconds)s),
    last_status = %(http_status)s, last_error = %(error)s, leased_by = NULL
WHERE delivery_id = %(delivery_id)s AND leased_by = %(replica)s AND attempts = %(attempts)s;

-- delivery_page --
-- An endpoint's deliveries newest first before the key (%(before_at)s, %(before_id)s),
-- of one status when %(status)s is set.
SELECT delivery_id, endpoint_id, event_type, event_key, status, attempts, created_at,
       next_attempt_at, give_up_at, last_attempt_at, last_error, last_status, delivered_at
FROM gateway.webhook_deliveries
WHERE endpoint_id = %(endpoint_id)s
  AND (CAST(%(status)s AS text) IS NULL OR status = CAST(%(status)s AS text))
  AND (CAST(%(before_at)s AS timestamptz) IS NULL
       OR (created_at, delivery_id) < (CAST(%(before_at)s AS timestamptz), CAST(%(before_id)s AS text)))
ORDER BY created_at DESC, delivery_id DESC
LIMIT %(limit)s;

-- delivery_redeliver --
-- Send a delivery again now under its id, with a new retry window (the caller's own
-- endpoint's only: A3).
UPDATE gateway.webhook_deliveries d
SET status = 'pending', next_attempt_at = now(), leased_by = NULL,
    give_up_at = now() + make_interval(secs => %(retry_seconds)s)
FROM gateway.webhook_endpoints e
WHERE e.endpoint_id = d.endpoint_id AND d.delivery_id = %(delivery_id)s
  AND e.principal = %(principal)s
RETURNING d.delivery_id, d.endpoint_id, d.event_type, d.event_key, d.status, d.attempts,
          d.created_at, d.next_attempt_at, d.give_up_at, d.last_attempt_at, d.last_error,
          d.last_status, d.delivered_at;

-- deliveries_purge --
-- Finished deliveries past the retention, at most %(limit)s; rows another replica is
-- deleting are skipped, not waited for.
DELETE FROM gateway.webhook_deliveries WHERE delivery_id IN (
    SELECT delivery_id FROM gateway.webhook_deliveries
    WHERE status IN ('delivered', 'gave_up')
      AND coalesce(delivered_at, last_attempt_at, created_at)
          < now() - make_interval(secs => %(keep_seconds)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED);

-- a2a_push_purge --
-- The A2A push configs whose call ended before the retention and which have nothing
-- still to send: their endpoints, with which the configs and deliveries go (CASCADE).
DELETE FROM gateway.webhook_endpoints WHERE kind = 'a2a_push' AND endpoint_id IN (
    SELECT c.endpoint_id FROM gateway.a2a_push_configs c
    WHERE c.done_at < now() - make_interval(secs => %(keep_seconds)s)
      AND NOT EXISTS (
          SELECT 1 FROM gateway.webhook_deliveries d
          WHERE d.endpoint_id = c.endpoint_id AND d.status IN ('pending', 'failing'))
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED);

-- next_delivery_due --
-- When the next delivery is due (the dispatcher sleeps until then, or a poll).
SELECT min(next_attempt_at) FROM gateway.webhook_deliveries WHERE status IN ('pending', 'failing');

-- ============================================================= A2A outbound (X4)

-- a2a_task_insert --
-- An external task a turn started, to follow until it ends (a second insert is a no-op).
INSERT INTO gateway.a2a_out_tasks
    (agent, task_id, kind, skill, conversation_id, target, context_id, state, delivered)
VALUES (%(agent)s, %(task_id)s, %(kind)s, %(skill)s, %(conversation_id)s, %(target)s,
        %(context_id)s, %(state)s, %(delivered)s)
ON CONFLICT (agent, task_id) DO NOTHING;

-- a2a_tasks_claim --
-- Open tasks nobody follows (or this replica does), oldest news first, held for a lease.
UPDATE gateway.a2a_out_tasks t
SET leased_by = %(replica)s, lease_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE (t.agent, t.task_id) IN (
    SELECT agent, task_id FROM gateway.a2a_out_tasks
    WHERE done_at IS NULL
      AND (lease_until IS NULL OR lease_until < now() OR leased_by = %(replica)s)
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING t.agent, t.task_id, t.kind, t.skill, t.conversation_id, t.target, t.context_id,
          t.state, t.delivered;

-- a2a_task_update --
-- What following a task found: its state, the messages delivered, whether it ended.
UPDATE gateway.a2a_out_tasks
SET state = %(state)s, delivered = %(delivered)s, last_error = %(last_error)s,
    updated_at = now(), done_at = CASE WHEN %(done)s THEN now() END
WHERE agent = %(agent)s AND task_id = %(task_id)s AND leased_by = %(replica)s;

-- ============================================================= A2A push (X2, N2)

-- push_lock --
-- One task's configs are set one at a time (its cap holds), until the commit.
SELECT pg_advisory_xact_lock(hashtext('gateway.a2a_push_configs:' || %(call_id)s));

-- push_replace_old --
-- Setting a config id again replaces it: the old one's endpoint (and deliveries) go.
DELETE FROM gateway.webhook_endpoints
WHERE endpoint_id IN (
    SELECT endpoint_id FROM gateway.a2a_push_configs
    WHERE call_id = %(call_id)s AND config_id = %(config_id)s AND principal = %(principal)s);

-- push_count --
-- How many configs a task has (its cap).
SELECT count(*) FROM gateway.a2a_push_configs WHERE call_id = %(call_id)s;

-- push_endpoint_insert --
INSERT INTO gateway.webhook_endpoints
    (endpoint_id, principal, url, description, secret, kind, headers)
VALUES (%(endpoint_id)s, %(principal)s, %(url)s, %(description)s, %(secret)s, 'a2a_push',
        CAST(%(headers)s AS jsonb));

-- push_config_insert --
INSERT INTO gateway.a2a_push_configs
    (endpoint_id, call_id, config_id, principal, token, auth_scheme)
VALUES (%(endpoint_id)s, %(call_id)s, %(config_id)s, %(principal)s, %(token)s, %(auth_scheme)s)
RETURNING endpoint_id, call_id, config_id, principal, token, auth_scheme, created_at,
          last_state, done_at, last_error, CAST(%(url)s AS text) AS url;

-- push_configs_of --
-- A task's configs of one principal (all of them, or the one with %(config_id)s).
SELECT p.endpoint_id, p.call_id, p.config_id, p.principal, p.token, p.auth_scheme,
       p.created_at, p.last_state, p.done_at, p.last_error, e.url
FROM gateway.a2a_push_configs p JOIN gateway.webhook_endpoints e USING (endpoint_id)
WHERE p.call_id = %(call_id)s AND p.principal = %(principal)s
  AND (CAST(%(config_id)s AS text) IS NULL OR p.config_id = CAST(%(config_id)s AS text))
ORDER BY p.created_at, p.config_id;

-- push_delete --
DELETE FROM gateway.webhook_endpoints
WHERE endpoint_id IN (
    SELECT endpoint_id FROM gateway.a2a_push_configs
    WHERE call_id = %(call_id)s AND config_id = %(config_id)s AND principal = %(principal)s)
RETURNING endpoint_id;

-- push_claim --
-- Up to %(limit)s configs whose call has not ended and that no replica follows (none, or
-- its lease ran out), whose principal still has a usable API token: this replica follows
-- them until its lease ends.
UPDATE gateway.a2a_push_configs p
SET leased_by = %(replica)s, lease_until = now() + make_interval(secs => %(lease_seconds)s)
FROM gateway.webhook_endpoints e
WHERE e.endpoint_id = p.endpoint_id
  AND p.endpoint_id IN (
    SELECT c.endpoint_id FROM gateway.a2a_push_configs c
    WHERE c.done_at IS NULL AND (c.lease_until IS NULL OR c.lease_until < now())
      AND EXISTS (
        SELECT 1 FROM gateway.api_tokens t
        WHERE t.principal = c.principal AND t.targets IS NULL AND t.revoked_at IS NULL
          AND (t.expires_at IS NULL OR t.expires_at > now()))
    ORDER BY c.lease_until NULLS FIRST
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED)
RETURNING p.endpoint_id, p.call_id, p.config_id, p.principal, p.token, p.auth_scheme,
          p.created_at, p.last_state, p.done_at, p.last_error, e.url;

-- push_renew --
-- Extend this replica's leases; the configs it no longer holds, that are done, or whose
-- principal has no usable API token any more are not returned.
UPDATE gateway.a2a_push_configs p
SET lease_until = now() + make_interval(secs => %(lease_seconds)s)
WHERE p.leased_by = %(replica)s AND p.done_at IS NULL
  AND EXISTS (
    SELECT 1 FROM gateway.api_tokens t
    WHERE t.principal = p.principal AND t.targets IS NULL AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > now()))
RETURNING p.endpoint_id;

-- push_release --
UPDATE gateway.a2a_push_configs SET leased_by = NULL, lease_until = NULL
WHERE endpoint_id = %(endpoint_id)s AND leased_by = %(replica)s;

-- push_advance --
-- The state just stored for delivery (and done once it is the end), only while this
-- replica holds the lease (no row: the lease is lost, the transaction rolls back).
UPDATE gateway.a2a_push_configs
SET last_state = %(state)s, last_error = '',
    done_at = CASE WHEN %(done)s THEN now() ELSE NULL END,
    leased_by = CASE WHEN %(done)s THEN NULL ELSE leased_by END,
    lease_until = CASE WHEN %(done)s THEN NULL ELSE lease_until END
WHERE endpoint_id = %(endpoint_id)s AND leased_by = %(replica)s
RETURNING endpoint_id;

-- push_error --
-- Why following a config's task failed just now; `done` when it never can (the call
-- is gone or no longer the principal's to see).
UPDATE gateway.a2a_push_configs
SET last_error = %(error)s, done_at = CASE WHEN %(done)s THEN now() ELSE done_at END
WHERE endpoint_id = %(endpoint_id)s AND leased_by = %(replica)s;
