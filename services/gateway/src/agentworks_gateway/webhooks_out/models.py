"""What webhooks out keep: endpoints, the feeds they follow, and deliveries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# A feed's source: the principal's call ends, or one inbox's new messages.
CALL_ENDS = "call_ends"
INBOX_PREFIX = "inbox:"

# A delivery's statuses, in the order a delivery can go through them.
STATUSES = ("pending", "failing", "delivered", "gave_up")


@dataclass(frozen=True)
class Feed:
    """One source an endpoint follows, with where its stream is."""

    endpoint_id: str
    source: str
    cursor: str
    created_at: datetime
    leased_by: str | None = None
    lease_until: datetime | None = None
    last_error: str = ""
    # Set when claimed: whom the feed's stream is read as.
    principal: str = ""


@dataclass(frozen=True)
class Endpoint:
    """A registered webhook endpoint (its secret is shown at create and rotate only)."""

    endpoint_id: str
    principal: str
    url: str
    description: str
    secret: str
    created_at: datetime
    secret_rotated_at: datetime | None
    feeds: tuple[Feed, ...] = ()


@dataclass(frozen=True)
class Delivery:
    """One event for one endpoint: its stable id (`webhook-id`) and where it stands."""

    delivery_id: str
    endpoint_id: str
    event_type: str
    event_key: str
    status: str
    attempts: int
    created_at: datetime
    next_attempt_at: datetime
    give_up_at: datetime
    last_attempt_at: datetime | None
    last_error: str
    last_status: int | None
    delivered_at: datetime | None


@dataclass(frozen=True)
class Attempt:
    """A delivery this replica claimed: what to send, where, signed with what."""

    delivery_id: str
    endpoint_id: str
    event_type: str
    payload: bytes
    attempts: int
    give_up_at: datetime
    url: str
    secret: str
    # Sent besides the signed headers (an A2A push config's token and authentication).
    headers: dict[str, str] = field(default_factory=dict)
