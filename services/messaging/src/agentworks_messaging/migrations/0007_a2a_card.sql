-- The owner's A2A card switch (X1): false hides the target from the gateway's A2A
-- binding (no card, not listed, JSON-RPC refused as for an unknown agent). NULL: never
-- set, which means on.
ALTER TABLE targets ADD COLUMN a2a_card boolean;
