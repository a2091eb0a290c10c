-- Fair turns (B9): a crew's claimable conversations are claimed in `turn_at` order, not
-- by age alone, so that one caller's burst of conversations cannot make another
-- caller's wait behind all of it (2,000 conversations opened in 5 s made another
-- caller's reply wait 15 s).
--
-- When a conversation becomes claimable (work waiting, no turn running: created, sent
-- to, or freed by its turn's end with work left), it is queued at
--     greatest(the target's earliest queued turn_at (now() if none),
--              its caller's latest queued turn_at + 1 second)
-- where the caller is the principal who started it (`started_by`). So each caller's
-- queued conversations are spaced a second apart in the order, and a caller with
-- nothing queued joins at the head: claims go round the callers one conversation each
-- (ties by age), and another caller's burst delays a conversation by at most one turn.
-- The second is a position in the order, not a wait: turn_at is never compared with
-- the clock. A trigger keeps every statement that changes the queue as it was; its two
-- look-ups are the first rows of the two partial indexes below.

ALTER TABLE conversations ADD COLUMN turn_at timestamptz;

UPDATE conversations SET turn_at = oldest_pending_at
WHERE pending_deliveries > 0 AND active_turn_id IS NULL;

DROP INDEX conversations_claimable;
CREATE INDEX conversations_claimable
    ON conversations (target_kind, target_name, turn_at, oldest_pending_at)
    WHERE pending_deliveries > 0 AND active_turn_id IS NULL;
CREATE INDEX conversations_claimable_by_caller
    ON conversations (target_kind, target_name, started_by, turn_at)
    WHERE pending_deliveries > 0 AND active_turn_id IS NULL;

CREATE FUNCTION queue_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.pending_deliveries > 0 AND NEW.active_turn_id IS NULL
       AND (TG_OP = 'INSERT'
            OR NOT (OLD.pending_deliveries > 0 AND OLD.active_turn_id IS NULL)) THEN
        -- NEW is not among the queued rows here (before the change it was not queued).
        NEW.turn_at := greatest(
            coalesce(
                (SELECT min(c.turn_at) FROM messaging.conversations c
                 WHERE c.target_kind = NEW.target_kind AND c.target_name = NEW.target_name
                   AND c.pending_deliveries > 0 AND c.active_turn_id IS NULL),
                now()),
            (SELECT max(c.turn_at) + interval '1 second' FROM messaging.conversations c
             WHERE c.target_kind = NEW.target_kind AND c.target_name = NEW.target_name
               AND c.started_by = NEW.started_by
               AND c.pending_deliveries > 0 AND c.active_turn_id IS NULL));
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER conversations_queue_turn
    BEFORE INSERT OR UPDATE OF pending_deliveries, active_turn_id ON conversations
    FOR EACH ROW EXECUTE FUNCTION queue_turn();
