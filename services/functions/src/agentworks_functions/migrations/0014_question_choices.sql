-- A question may offer choices (F11, M2): a reply must then be one of them. Empty: any
-- text, as before.
ALTER TABLE questions ADD COLUMN choices text[] NOT NULL DEFAULT '{}';

-- When a call last changed (CallStatus.updated_at, V7, M1): every change to a call
-- increases its version, and a trigger sets updated_at whenever it does, so that no
-- statement that changes a call can forget it. Calls made before this migration get
-- their last known time.
ALTER TABLE calls ADD COLUMN updated_at timestamptz;
UPDATE calls SET updated_at = greatest(created_at, claimed_at, ended_at);
ALTER TABLE calls ALTER COLUMN updated_at SET DEFAULT now(),
                  ALTER COLUMN updated_at SET NOT NULL;

CREATE FUNCTION functions.touch_call_v1() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END
$$;

CREATE TRIGGER calls_touch BEFORE UPDATE OF version ON calls FOR EACH ROW
    WHEN (NEW.version IS DISTINCT FROM OLD.version)
    EXECUTE FUNCTION functions.touch_call_v1();
