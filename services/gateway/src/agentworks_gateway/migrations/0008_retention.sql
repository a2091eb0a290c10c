-- Retention (N2, X2): finished deliveries, and the A2A push configs of ended calls, are
-- deleted GATEWAY_WEBHOOKS_KEEP_SECONDS after they finished (webhooks_out.retention).
-- These indexes find them without reading the rest of either table.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries
    ((coalesce(delivered_at, last_attempt_at, created_at)))
    WHERE status IN ('delivered', 'gave_up');
CREATE INDEX a2a_push_configs_done ON a2a_push_configs (done_at) WHERE done_at IS NOT NULL;
