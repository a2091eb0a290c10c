-- The ends of each caller's calls in the order they ended (N1, N2: WatchCallEnds).
--
-- calls.end_seq numbers the ends of one caller's calls 1, 2, 3, ... with no gap, set by
-- a trigger whenever a call leaves running/waiting_for_input (every path: a finish, a
-- failure, a cancel, the sweeper's interruptions), so no code path can forget it. The
-- number comes from the caller's row of caller_ends, updated by that trigger: the row
-- stays locked until the ending transaction commits, so the next end of the same
-- caller's calls waits for it, and ends become visible in end_seq order. A reader that
-- has seen end n never sees an end below n appear later (a global sequence gives no
-- such promise: a transaction holding number 10 may commit after the one holding 11,
-- and a cursor already past 11 would lose 10). Ends of different callers do not wait
-- for each other.
--
-- The trigger also sends NOTIFY functions_calls 'ends:<caller>' (at commit): what the
-- caller's WatchCallEnds streams wait on.

CREATE TABLE caller_ends (
    caller   text PRIMARY KEY,
    last_end bigint NOT NULL
);

ALTER TABLE calls ADD COLUMN end_seq bigint;

-- The calls that ended before this migration, numbered in the order they ended.
UPDATE calls SET end_seq = ended.seq
FROM (SELECT id, row_number() OVER (PARTITION BY caller ORDER BY ended_at, id) AS seq
      FROM calls WHERE status NOT IN ('running', 'waiting_for_input')) AS ended
WHERE calls.id = ended.id;

INSERT INTO caller_ends (caller, last_end)
SELECT caller, max(end_seq) FROM calls WHERE end_seq IS NOT NULL GROUP BY caller;

CREATE UNIQUE INDEX calls_ends_of_caller ON calls (caller, end_seq) WHERE end_seq IS NOT NULL;

CREATE FUNCTION functions.number_call_end_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO functions.caller_ends AS e (caller, last_end) VALUES (NEW.caller, 1)
    ON CONFLICT (caller) DO UPDATE SET last_end = e.last_end + 1
    RETURNING last_end INTO NEW.end_seq;
    PERFORM pg_notify('functions_calls', 'ends:' || NEW.caller);
    RETURN NEW;
END
$$;

CREATE TRIGGER calls_number_end BEFORE UPDATE OF status ON calls FOR EACH ROW
    WHEN (OLD.status IN ('running', 'waiting_for_input')
          AND NEW.status NOT IN ('running', 'waiting_for_input'))
    EXECUTE FUNCTION functions.number_call_end_v1();
