"""Domain objects the scheduler store returns and the servicer translates to protos, and
what the scheduler asks of messaging (`Conversations`, implemented by deliveries.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentworks.core.errors import AgentWorksError
    from agentworks.core.identity import Identity


@dataclass(frozen=True)
class WakeUp:
    id: str
    seq: int
    conversation_id: str
    product: str
    note: str
    due_at: datetime
    status: str  # pending | fired | cancelled | failed
    created_by: str
    created_at: datetime
    fired_at: datetime | None
    delivery_id: str | None
    late_seconds: float | None
    error: str | None


@dataclass(frozen=True)
class Recurrence:
    """A cron rule read in a time zone, or a fixed interval."""

    cron: str | None = None
    interval_seconds: int | None = None
    time_zone: str = "UTC"

    def __str__(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} in {self.time_zone}"
        return f"every {self.interval_seconds} s"


@dataclass(frozen=True)
class Schedule:
    id: str
    seq: int
    name: str
    conversation_id: str
    product: str
    prompt: str
    recurrence: Recurrence
    # Intervals: occurrences fall on anchor_at + k * interval.
    anchor_at: datetime
    paused: bool
    next_fire_at: datetime
    last_fired_at: datetime | None
    fire_count: int
    created_by: str
    created_at: datetime
    updated_at: datetime
    last_error: str | None


@dataclass(frozen=True)
class PauseEntry:
    product: str  # "" is the global pause
    reason: str
    paused_by: str
    paused_at: datetime


@dataclass(frozen=True)
class Webhook:
    id: str
    seq: int
    name: str
    conversation_id: str
    product: str
    salt: str
    secret_fingerprint: str
    created_by: str
    created_at: datetime
    secret_rotated_at: datetime | None
    # Only right after creation or rotation.
    secret: str = ""


@dataclass(frozen=True)
class Delivered:
    """Messaging accepted the occurrence (created=False: it already had that key).

    `delivery_id` is None when messaging held the key with other content (ALREADY_EXISTS):
    the occurrence was delivered by an earlier attempt whose answer was lost.
    """

    delivery_id: str | None
    created: bool


@dataclass(frozen=True)
class Failed:
    """Messaging refused the occurrence for good; it is not retried."""

    error: str


@dataclass(frozen=True)
class Retry:
    """Messaging could not be reached or timed out; the next tick tries again."""

    error: str


FireOutcome = Delivered | Failed | Retry


@dataclass(frozen=True)
class Due:
    """One claimed occurrence, with the database clock at claim time."""

    item: Any  # WakeUp | Schedule
    now: datetime

    @property
    def late(self) -> timedelta:
        due = self.item.due_at if isinstance(self.item, WakeUp) else self.item.next_fire_at
        return max(timedelta(0), self.now - due)


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_seq: int


@dataclass(frozen=True)
class Participation:
    """What messaging says about a conversation the caller takes part in."""

    opener: str  # the principal that sent the opening message
    target: str  # crew:<name> or workflow:<id>


class Conversations(Protocol):
    """What the scheduler asks of the messaging service."""

    async def participation(self, identity: Identity, conversation_id: str) -> Participation:
        """As `identity`: who opened the conversation and which target it is with.

        Raises NotFound when the conversation does not exist or the caller is not one
        of its participants.
        """
        ...

    async def owned_targets(self, identity: Identity) -> frozenset[str]:
        """As `identity`: the targets it owns (`crew:<name>`, `workflow:<id>`), as
        messaging records them now."""
        ...

    async def enqueue(
        self,
        *,
        conversation_id: str,
        kind: str,
        idempotency_key: str,
        text: str,
        payload: bytes = b"",
        attributes: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        """Put a delivery into the conversation's turn queue: (delivery_id, created)."""
        ...

    async def enqueue_many(
        self, requests: Sequence[Mapping[str, Any]]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        """Many deliveries in one request (each with `enqueue`'s fields, at most
        MAX_ENQUEUE_ITEMS): one outcome per request, (delivery_id, created) or the error
        that delivery alone failed with. An error of the whole request is raised."""
        ...
