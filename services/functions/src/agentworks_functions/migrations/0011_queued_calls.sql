-- The claimable calls in a table of their own (R1): a call is in queued_calls while it
-- is running and unclaimed, kept so by two triggers on calls, and a claim takes the
-- oldest of its targets from there.
--
-- Before, a claim scanned calls through the partial index calls_claimable. But the
-- listing index calls_listed_by_target (0008) has the same leading columns and order,
-- and a generic plan made while calls was small (a new database: the first statements
-- a replica prepares) costs both the same and may pick the listing index, which walks
-- every call the target ever had, oldest first, until an unclaimed one: each claim
-- grew with the target's history (seen in the benchmark: 1,700 rows read per claim
-- after a few seconds). The plan is made again only when the table is analyzed. A
-- table holding only the queue has one index that can serve a claim, and stays small.
CREATE TABLE queued_calls (
    call_id     uuid PRIMARY KEY,   -- calls.id (no foreign key: a check per insert)
    target_kind text NOT NULL,
    target_name text NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX queued_calls_oldest ON queued_calls (target_kind, target_name, created_at);

CREATE FUNCTION functions.queue_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO functions.queued_calls (call_id, target_kind, target_name, created_at)
    VALUES (NEW.id, NEW.target_kind, NEW.target_name, NEW.created_at);
    RETURN NULL;
END
$$;

CREATE FUNCTION functions.unqueue_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM functions.queued_calls WHERE call_id = OLD.id;
    RETURN NULL;
END
$$;

-- AFTER, so that an insert ON CONFLICT DO NOTHING skipped (a retry) queues nothing.
CREATE TRIGGER calls_queue AFTER INSERT ON calls FOR EACH ROW
    WHEN (NEW.status = 'running' AND NEW.runtime IS NULL)
    EXECUTE FUNCTION functions.queue_call();

-- Claimed, or ended unclaimed (cancelled, interrupted by the sweeper).
CREATE TRIGGER calls_unqueue AFTER UPDATE OF status, runtime ON calls FOR EACH ROW
    WHEN (OLD.status = 'running' AND OLD.runtime IS NULL
          AND (NEW.status <> 'running' OR NEW.runtime IS NOT NULL))
    EXECUTE FUNCTION functions.unqueue_call();

INSERT INTO queued_calls (call_id, target_kind, target_name, created_at)
SELECT id, target_kind, target_name, created_at FROM calls
WHERE status = 'running' AND runtime IS NULL;

DROP INDEX calls_claimable;
