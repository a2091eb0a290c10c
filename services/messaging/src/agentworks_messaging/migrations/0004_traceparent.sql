-- Trace context carried through claims (issue 26, P4): the W3C traceparent of the
-- request that queued a delivery (a send, a wake-up, a completion notice), returned on
-- the claimed Turn, so the runtime's work joins the sender's trace. '' without tracing.
ALTER TABLE deliveries ADD COLUMN traceparent text NOT NULL DEFAULT '';
