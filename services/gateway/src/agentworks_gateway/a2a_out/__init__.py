"""A2A outbound (X4; docs/a2a.md, Outbound): an agent in a turn converses with and calls
external A2A agents on the operator's allow-list, through the gateway, which holds their
credentials; replies and task ends come back as turns of the turn's conversation.

`settings` (the allow-list file), `service` (who may, the use cases, the deliveries back),
`peer` (a2a-sdk's client, under the outbound address policy), `follow` (open tasks
followed until they end, across restarts), `store` (their table), `routes` (HTTP),
`replica` (this replica's use cases and follower). The package itself imports nothing:
the gateway's config imports `settings` alone.
"""
