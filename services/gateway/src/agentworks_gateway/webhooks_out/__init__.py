"""Webhooks out (N2): a principal registers an endpoint for its calls' ends and/or an
inbox's new messages; the gateway signs each event as Standard Webhooks says and posts
it, retried with backoff for a stated time, under a stable id, only to addresses the
operator's policy allows.

- `settings`: the `GATEWAY_WEBHOOKS_*` settings;
- `policy`: which addresses may be reached (checked at registration and at each send);
- `sending`: secrets, the signed request, one bounded attempt to the checked address;
- `store`: the endpoints, feeds and deliveries (named queries);
- `endpoints`: the use cases the `endpoints` tool runs (register, list, ..., redeliver);
- `events`: a stream's event as a delivery's body;
- `feeds`: one follower per feed across replicas (a lease), writing delivery rows and
  the cursor in one transaction;
- `leased`: the lease loop feeds and A2A push configs share (renew, claim, follow);
- `dispatcher`: claims due deliveries (no two senders for one) and sends them.
"""
