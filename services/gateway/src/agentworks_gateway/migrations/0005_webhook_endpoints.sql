-- Webhooks out (N2): endpoints a principal registered, the feeds they follow (one per
-- source: the principal's call ends, or one inbox), and the deliveries made from them.
-- The secret is kept as given (Standard Webhooks signs with HMAC: the gateway needs it).
CREATE TABLE webhook_endpoints (
    endpoint_id       text PRIMARY KEY,
    principal         text NOT NULL,
    url               text NOT NULL,
    description       text NOT NULL DEFAULT '',
    secret            text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    secret_rotated_at timestamptz
);
CREATE INDEX webhook_endpoints_principal ON webhook_endpoints (principal, created_at);

-- One feed per endpoint and source ('call_ends' or 'inbox:<inbox_id>'): the stream's
-- cursor, advanced in the transaction that inserts the deliveries it read, and the lease
-- of the one replica that follows it. Events from before `created_at` are skipped.
CREATE TABLE webhook_feeds (
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
    source      text NOT NULL,
    cursor      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    leased_by   text,
    lease_until timestamptz,
    last_error  text NOT NULL DEFAULT '',
    PRIMARY KEY (endpoint_id, source)
);

-- One row per event per endpoint, before the first attempt. `delivery_id` is the stable
-- `webhook-id` (derived from the endpoint and the event, so a feed that reads an event
-- twice inserts it once). Status: pending, delivered, failing, gave_up. A claim moves
-- next_attempt_at past its lease and names its replica in leased_by: another replica takes
-- the row only once that time has passed (a replica killed mid-send).
CREATE TABLE webhook_deliveries (
    delivery_id     text PRIMARY KEY,
    endpoint_id     text NOT NULL REFERENCES webhook_endpoints (endpoint_id) ON DELETE CASCADE,
    event_type      text NOT NULL,
    event_key       text NOT NULL,
    payload         bytea NOT NULL,
    status          text NOT NULL DEFAULT 'pending',
    attempts        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    give_up_at      timestamptz NOT NULL,
    last_attempt_at timestamptz,
    last_error      text NOT NULL DEFAULT '',
    last_status     integer,
    delivered_at    timestamptz,
    leased_by       text,
    CONSTRAINT webhook_deliveries_status_check
        CHECK (status IN ('pending', 'delivered', 'failing', 'gave_up'))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status IN ('pending', 'failing');
CREATE INDEX webhook_deliveries_listed ON webhook_deliveries (endpoint_id, created_at, delivery_id);
