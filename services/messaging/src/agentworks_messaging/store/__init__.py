"""SQL for the messaging use cases: one method per use case, each one short transaction.

Concurrency rests on PostgreSQL alone (P3): the conversation row lock orders positions
and guards the turn queue, `ON CONFLICT` deduplicates retries, `FOR UPDATE SKIP LOCKED`
lets replicas claim turns and sweep leases without stepping on each other, and
`pg_notify` (sent at commit) wakes long-polls on every replica."""

from __future__ import annotations

from agentworks_messaging.store.reads import ReadQueries
from agentworks_messaging.store.rows import INBOX_CHANNEL, TURN_CHANNEL
from agentworks_messaging.store.sends import SendQueries
from agentworks_messaging.store.targets import TargetQueries
from agentworks_messaging.store.turns import TurnQueries


class MessagingStore(TargetQueries, SendQueries, ReadQueries, TurnQueries):
    """All SQL of the messaging service.

    The hot use cases (send, reply, read, enqueue) are fixed SQL on `Database.raw()`;
    the rest go through SQLAlchemy Core."""


__all__ = ["INBOX_CHANNEL", "TURN_CHANNEL", "MessagingStore"]
