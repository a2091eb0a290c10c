"""The only SQL of the messaging service: one method per use case, each one short transaction.

Concurrency rests on PostgreSQL alone (P3): the conversation row lock orders positions
and guards the turn queue, `ON CONFLICT` deduplicates retries, `FOR UPDATE SKIP LOCKED`
lets replicas claim turns and sweep leases without stepping on each other, and
`pg_notify` (sent at commit) wakes long-polls on every replica.

Parts by job: targets.py (targets), sends.py (conversations, sends, replies, retry keys),
reads.py (inbox reads, transcripts), listing.py (listing conversations), turns.py
(deliveries and the turn queue); rows.py turns rows into the domain types of models.py.
"""

from __future__ import annotations

from agentworks_messaging.store.listing import ListingQueries
from agentworks_messaging.store.reads import ReadQueries
from agentworks_messaging.store.rows import INBOX_CHANNEL, TURN_CHANNEL
from agentworks_messaging.store.sends import SendQueries
from agentworks_messaging.store.targets import TargetQueries
from agentworks_messaging.store.turns import TurnQueries


class MessagingStore(TargetQueries, SendQueries, ReadQueries, TurnQueries, ListingQueries):
    """All SQL of the messaging service (see `MessagingStoreBase` for how it runs)."""


__all__ = ["INBOX_CHANNEL", "TURN_CHANNEL", "MessagingStore"]
