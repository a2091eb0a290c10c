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
