-- Why a turn failed (L12): what its runtime said when completing it (CompleteTurn's
-- `error`, at most 4 KiB: a failed turn command's stderr tail or its handler's error).
-- Shown on the turn's deliveries in GetTranscript to the target's owner and the operator
-- only (A3). '' when the turn did not fail.
ALTER TABLE turns ADD COLUMN error text NOT NULL DEFAULT '';
