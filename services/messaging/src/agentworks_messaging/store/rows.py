"""Rows -> domain objects, the NOTIFY channels, and the small helpers the store's parts share."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg.types.json import Jsonb

from agentworks.core.errors import NotFound, PreconditionFailed, Reason
from agentworks_messaging.models import Delivery, Message, Target, TargetKey

INBOX_CHANNEL = "messaging_inbox"
TURN_CHANNEL = "messaging_turns"


def target_from(row: Any) -> Target:
    return Target(
        key=TargetKey(row.kind, row.name),
        owner=row.owner,
        free_text_ask=row.free_text_ask,
        created_at=row.created_at,
        updated_at=row.updated_at,
        a2a_card=row.a2a_card,
    )


def message_from(row: Any) -> Message:
    return Message(
        id=str(row.id),
        conversation_id=str(row.conversation_id),
        inbox_id=str(row.inbox_id),
        position=row.position,
        direction=row.direction,
        sender=row.sender,
        text=row.text,
        parts=row.parts,
        created_at=row.created_at,
    )


def delivery_from(row: Any, message: Message | None = None) -> Delivery:
    return Delivery(
        id=str(row.id),
        conversation_id=str(row.conversation_id),
        position=row.position,
        kind=row.kind,
        status=row.status,
        text=row.text,
        payload=bytes(row.payload) if row.payload is not None else None,
        attributes=row.attributes,
        turn_id=str(row.turn_id) if row.turn_id else None,
        created_at=row.created_at,
        message=message,
        turn_error=getattr(row, "turn_error", None) or "",
    )


def parse_uuid(value: str, what: str) -> uuid.UUID:
    """An id from a request; one that is not a UUID names nothing stored."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"{what} {value!r} not found") from None


def jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def messaging_disabled(key: TargetKey) -> PreconditionFailed:
    return PreconditionFailed(
        f"{key} has agent messaging turned off (capabilities.free_text_ask = false): "
        "conversational messages are refused; call one of its declared functions instead",
        reason=Reason.MESSAGING_DISABLED,
        metadata={"target": str(key)},
    )


def reply_refused(origin: TargetKey) -> PreconditionFailed:
    """A reply into a conversation whose origin target has its switch off (C8, L5)."""
    return PreconditionFailed(
        f"this conversation was started by {origin}, which has agent messaging turned off "
        "(capabilities.free_text_ask = false): replies to it are refused, as every "
        "incoming conversational message to it is; nothing was stored. Call one of its "
        "declared functions instead",
        reason=Reason.MESSAGING_DISABLED,
        metadata={"target": str(origin)},
    )
