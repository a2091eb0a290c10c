"""gRPC metadata keys that clients and servers both read (the message size cap is
`agentworks.core.limits.MAX_MESSAGE_BYTES`)."""

# A request's id: sent by a client, logged by every service it reaches.
REQUEST_ID_KEY = "x-request-id"
# Trailing metadata on every refusal our servers send. A client seeing it knows the
# service answered, and that the message is the service's own, complete words (which
# may quote another service's "did not answer ...; retry shortly"); without it the
# status came from the channel (no connection, the client's own deadline).
ANSWERED_KEY = "x-agentworks-answered"
