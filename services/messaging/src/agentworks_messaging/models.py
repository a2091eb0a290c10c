"""Domain objects the messaging store returns and the servicer translates to protos."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentworks.core.targets import TargetKey


@dataclass(frozen=True)
class Target:
    key: TargetKey
    owner: str
    free_text_ask: bool | None
    created_at: datetime
    updated_at: datetime
    a2a_card: bool | None = None

    @property
    def messaging_enabled(self) -> bool:
        """C1: on unless explicitly false."""
        return self.free_text_ask is not False


@dataclass(frozen=True)
class Capabilities:
    """A target's switches as a request gives them; None is "not given" (C1, C8, X1)."""

    free_text_ask: bool | None = None
    a2a_card: bool | None = None


@dataclass(frozen=True)
class Receipt:
    message_id: str
    conversation_id: str
    inbox_id: str
    # The message's place in the conversation (its receipt's cursor: C7, N1).
    position: int


@dataclass(frozen=True)
class Message:
    id: str
    conversation_id: str
    inbox_id: str
    position: int
    direction: str
    sender: str
    text: str
    parts: list[dict[str, Any]] | None
    created_at: datetime


@dataclass(frozen=True)
class InboxEvent:
    """One event of a subscription (N1): a message, or a heartbeat (`message` None) sent
    at `at`; `cursor` is where to resume after it."""

    cursor: str
    message: Message | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class Delivery:
    id: str
    conversation_id: str
    position: int
    kind: str
    status: str
    text: str
    payload: bytes | None
    attributes: dict[str, Any] | None
    turn_id: str | None
    created_at: datetime
    message: Message | None = None
    # Why the delivery's turn failed (L12), for those who may read it (A3); "" otherwise.
    turn_error: str = ""


@dataclass(frozen=True)
class Turn:
    id: str
    conversation_id: str
    target: TargetKey
    reply_inbox_id: str
    lease_expires_at: datetime
    deliveries: list[Delivery] = field(default_factory=list)
    # The W3C trace context of its oldest traced delivery ("" without tracing).
    traceparent: str = ""


@dataclass(frozen=True)
class Page:
    """Messages or transcript entries after a cursor, and the position to continue from."""

    items: list[Any]
    last_position: int


@dataclass(frozen=True)
class Transcript:
    """One page of a conversation's transcript, with what the conversation is."""

    entries: list[Message | Delivery]
    next_cursor: str
    target: TargetKey
    inbox_id: str
    conversation_id: str = ""


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation in a list (V1): its inbox, its latest message, what is new."""

    conversation_id: str
    inbox_id: str
    principal: str
    target: TargetKey
    started_by: str
    created_at: datetime
    message_count: int
    last_message: Message | None
    last_position: int
    new_messages: int


@dataclass(frozen=True)
class NewDelivery:
    """A delivery to put into a conversation's turn queue, checked (S6, F13)."""

    conversation_id: str
    kind: str
    text: str
    payload: bytes | None
    attributes: dict[str, Any] | None
    idempotency_key: str


@dataclass(frozen=True)
class TurnQueue:
    """One target's turn queue (the gauges of metrics.py)."""

    target: TargetKey
    queued: int  # conversations with pending deliveries and no turn running
    age_seconds: float  # how long the oldest of those has waited (0: none)
    active: int  # turns claimed and not ended yet
