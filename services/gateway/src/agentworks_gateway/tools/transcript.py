"""The read-only `transcript` tool (V2, C12), on MCP and `/api`: a conversation's whole
transcript, both directions, with its deliveries of every kind, a page at a time.

A tool of its own rather than a `messages` action: MCP hints are per tool, and
`messages` sends, so it cannot be read-only; hosts may run this one without asking.
"""

from __future__ import annotations

import base64
from typing import Any

from agentworks.client import target_str
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.core.jsontext import loads
from agentworks.core.limits import LIST_PAGE_DEFAULT, MAX_LIST_PAGE
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.tools.messages import message_dict
from agentworks_gateway.tools.toolkit import Args, Tool, timestamp


def _name(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def delivery_dict(delivery: m.Delivery) -> dict[str, Any]:
    """A delivery record: what entered the agents' turn queue, and how far it got."""
    payload_text: str | None = None
    payload_base64: str | None = None
    if delivery.payload:
        try:
            payload_text = delivery.payload.decode()
        except UnicodeDecodeError:
            payload_base64 = base64.b64encode(delivery.payload).decode()
    return {
        "type": "delivery",
        "delivery_id": delivery.delivery_id,
        "kind": _name(m.DeliveryKind, delivery.kind, "DELIVERY_KIND_"),
        "status": _name(m.DeliveryStatus, delivery.status, "DELIVERY_STATUS_"),
        "text": delivery.text,
        "message_id": delivery.message.message_id if delivery.HasField("message") else None,
        "payload": payload_text,
        "payload_base64": payload_base64,
        "attributes": loads(delivery.attributes_json, "attributes", None),
        "turn_id": delivery.turn_id or None,
        # Why its turn failed (L12): for the target's owner and operators only (A3).
        "turn_error": delivery.turn_error or None,
        "created_at": timestamp(delivery.created_at),
    }


def entry_dict(entry: m.TranscriptEntry) -> dict[str, Any]:
    """A transcript entry: a message (either direction) or a delivery record."""
    if entry.HasField("message"):
        out = message_dict(entry.message)
        out.pop("conversation_id")
        return {"type": "message", **out}
    return delivery_dict(entry.delivery)


async def transcript(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`transcript`: one page of a conversation's transcript (V2)."""
    given = [n for n in ("conversation_id", "inbox_id") if args.get(n)]
    if len(given) != 1:
        raise errors.InvalidArgument(
            "transcript takes exactly one of conversation_id and inbox_id (got "
            f"{', '.join(given) or 'neither'}): the conversation to read",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("inbox_id", "oneof"),
        )
    page = await gateway.messaging(identity).get_transcript(
        args.get("conversation_id", ""),
        inbox_id=args.get("inbox_id", ""),
        after=args.get("cursor", ""),
        limit=args.get("limit", 0),
    )
    return {
        "conversation_id": page.conversation_id,
        "target": target_str(page.target),
        "inbox_id": page.inbox_id,
        "items": [entry_dict(e) for e in page.entries],
        "next_cursor": page.next_cursor,
    }


TRANSCRIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "conversation_id": {
            "type": "string",
            "description": "The conversation to read (from a send receipt or list "
            "what=conversations). Give this or inbox_id.",
        },
        "inbox_id": {
            "type": "string",
            "description": "Read the conversation of this inbox instead.",
        },
        "cursor": {
            "type": "string",
            "description": "The next_cursor of the previous page; omit to start at the first "
            "entry. The same cursor returns the same page.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIST_PAGE,
            "description": f"At most this many entries (1-{MAX_LIST_PAGE}, default "
            f"{LIST_PAGE_DEFAULT}).",
        },
    },
    "additionalProperties": False,
}

TRANSCRIPT_TOOL = Tool(
    "transcript",
    "Read a conversation's whole transcript (read-only), oldest first: the messages both "
    "ways (direction to_target: sent to the crew or workflow; to_inbox: an agent's reply) "
    "and the delivery records of every kind (message, wake_up, schedule, webhook, "
    "function_completed, conversation_reply) with their status (pending, in_turn, handled, "
    "interrupted); a delivery whose turn failed has turn_error (its command's exit status "
    "and stderr tail) when you own the target or are an operator, else null. "
    "Returns {conversation_id, target, inbox_id, items, next_cursor}; next_cursor is always "
    "set: pass it back as cursor, and an empty page means nothing new yet.",
    TRANSCRIPT_SCHEMA,
    transcript,
)
