"""Messaging tools (C2-C9, G2): `messages` (send, read) and its aliases `ask_crew` and `chat`.

Handlers translate JSON to `MessagingClient` calls and protobuf back to JSON; messaging
checks destinations, text, parts, targets, access and sizes, and words the refusals.
"""

from __future__ import annotations

from typing import Any

from agentworks.client.messaging import parts, parts_json
from agentworks.core import errors, progress
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_INBOX_PAGE, MAX_SUBMISSION_ID, MAX_WAIT_SECONDS
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.tools.toolkit import Args, Tool, check_fields, require, timestamp

READ_LIMIT_MAX = MAX_INBOX_PAGE  # a page of an inbox (C7)

# ------------------------------------------------------------------------ translation


def receipt_dict(receipt: m.SendReceipt) -> dict[str, Any]:
    """A send receipt (C2) as JSON."""
    return {
        "accepted": receipt.accepted,
        "message_id": receipt.message_id,
        "conversation_id": receipt.conversation_id,
        "inbox_id": receipt.inbox_id,
    }


def message_dict(message: m.Message) -> dict[str, Any]:
    """A conversation message as JSON."""
    out: dict[str, Any] = {
        "message_id": message.message_id,
        "conversation_id": message.conversation_id,
        "inbox_id": message.inbox_id,
        "sender": message.sender,
        "text": message.text,
        "created_at": timestamp(message.created_at),
        "direction": message.direction,
    }
    if message.parts:
        out["parts"] = parts_json(message.parts)
    return out


# ------------------------------------------------------------------------- handlers


def _destination(tool: str, args: Args, names: tuple[str, ...]) -> str | None:
    """Which of the tool's destination arguments is given (an empty one is not given).

    Translation, not a rule: these arguments become the request's one `destination`
    (a protobuf oneof), which cannot carry several, so several are refused here, as
    messaging refuses none: FIELD_RULE on `destination`.
    """
    given = [n for n in names if args.get(n)]
    if len(given) > 1:
        listed = ", ".join(names[:-1]) + " or " + names[-1]
        raise errors.InvalidArgument(
            f"destination is ambiguous: {tool} takes one of {listed} (got "
            f"{', '.join(given)}): a target (crew or workflow) starts a new conversation, "
            "an inbox_id continues one",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("destination", "oneof"),
        )
    return given[0] if given else None


# The tools' `message` argument is messaging's `text` field. A refusal of the text names
# the field in its ErrorInfo metadata (`field`); read there, never in the words, it is
# given the argument's name, and the words, messaging's, say which argument they mean.
_ARGUMENT_OF_FIELD = {"text": "message"}


def _named_for_tool(exc: errors.InvalidArgument) -> errors.InvalidArgument:
    argument = _ARGUMENT_OF_FIELD.get(exc.metadata.get("field", ""))
    if argument is None:
        return exc
    field = exc.metadata["field"]
    return errors.InvalidArgument(
        f"{exc.message} (messaging's `{field}` is this tool's `{argument}` argument)",
        reason=exc.reason,
        metadata={**exc.metadata, "field": argument},
        retry_after=exc.retry_after,
    )


_SEND_FIELDS = ("crew", "workflow", "inbox_id", "message", "parts", "submission_id")
_READ_FIELDS = ("inbox_id", "after", "limit", "wait_seconds")


async def _send(
    gateway: Any,
    identity: Identity,
    tool: str,
    args: Args,
    destinations: tuple[str, ...],
    channel: m.Channel = m.CHANNEL_PROGRAMMATIC,
) -> dict[str, Any]:
    destination = _destination(tool, args, destinations)
    client = gateway.messaging(identity)
    try:
        receipt = await client.send(
            args.get("message", ""),
            target=None
            if destination in (None, "inbox_id")
            else f"{destination}:{args[destination]}",
            inbox_id=args.get("inbox_id"),
            submission_id=args.get("submission_id", ""),
            parts=parts(args.get("parts", ())),
            channel=channel,
        )
    except errors.InvalidArgument as exc:
        raise _named_for_tool(exc) from None
    return receipt_dict(receipt)


async def messages(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`messages`: send (C2-C4) or read (C7)."""
    action = args["action"]
    if action == "send":
        check_fields("messages", action, args, _SEND_FIELDS)
        return await _send(
            gateway, identity, "messages send", args, ("crew", "workflow", "inbox_id")
        )
    check_fields("messages", action, args, _READ_FIELDS)
    require("messages", action, args, "inbox_id")
    client = gateway.messaging(identity)
    wait = args.get("wait_seconds", 0)
    response = await progress.waiting(  # progress over MCP when asked (N3)
        gateway.long_poll(
            lambda wait: client.read(
                args["inbox_id"],
                after=args.get("after", ""),
                limit=args.get("limit", 0),
                wait_seconds=wait,
            ),
            wait,
        ),
        "waiting for a message in the inbox",
        bound=wait,
    )
    return {
        "messages": [message_dict(msg) for msg in response.messages],
        "next_cursor": response.next_cursor,
    }


async def app_chat(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """The web console's chat (V5), not a tool: `messages send` on the app channel.

    A person (a `user:` principal) in the console writes on the app channel, which
    messaging lets past the messaging switch for the target's owner only (C8); anyone
    else's message is programmatic. Served by the console alone: MCP and `/api` callers
    are programs, and their messages stay programmatic.
    """
    check_fields("messages", "send", args, _SEND_FIELDS)
    channel = m.CHANNEL_APP if identity.kind == "user" else m.CHANNEL_PROGRAMMATIC
    return await _send(
        gateway, identity, "messages send", args, ("crew", "workflow", "inbox_id"), channel
    )


async def ask_crew(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`ask_crew`: send to a crew (C9)."""
    return await _send(gateway, identity, "ask_crew", args, ("crew", "inbox_id"))


async def chat(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`chat`: send to a workflow (C9)."""
    return await _send(gateway, identity, "chat", args, ("workflow", "inbox_id"))


# -------------------------------------------------------------------------- schemas

_PARTS: dict[str, Any] = {
    "type": "array",
    "description": "send: optional structured parts besides the text, each "
    '{"text": "..."} or {"data": {...JSON object...}}.',
    "items": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "data": {"type": "object"}},
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
    },
}
_SUBMISSION_ID: dict[str, Any] = {
    "type": "string",
    "maxLength": MAX_SUBMISSION_ID,
    "description": f"Optional retry key (at most {MAX_SUBMISSION_ID} characters). Sending "
    "again with the same key returns the original "
    "receipt and delivers nothing twice; the same key with a different message is refused.",
}
_RECEIPT_NOTE = (
    "Returns a delivery receipt {accepted, message_id, conversation_id, inbox_id}, never an "
    "answer: agents reply when they choose to. Read replies with the messages tool "
    "(action read, inbox_id from the receipt)."
)

MESSAGES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["send", "read"],
            "description": "send: post a message to a crew, a workflow, or the conversation of "
            "an inbox. read: page through the messages agents sent to an inbox.",
        },
        "crew": {
            "type": "string",
            "description": "send: start a new conversation with this crew (its name). Give "
            "exactly one of crew, workflow, inbox_id.",
        },
        "workflow": {
            "type": "string",
            "description": "send: start a new conversation with this workflow (its id).",
        },
        "inbox_id": {
            "type": "string",
            "description": "send: continue the conversation of this inbox. read (required): "
            "the inbox to read, from a send receipt.",
        },
        "message": {"type": "string", "description": "send (required): the message text."},
        "parts": _PARTS,
        "submission_id": {
            **_SUBMISSION_ID,
            "description": "send: " + _SUBMISSION_ID["description"],
        },
        "after": {
            "type": "string",
            "description": "read: the next_cursor of a previous read; omit to start from the "
            "first message. Reading does not consume: the same cursor returns the same page.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": READ_LIMIT_MAX,
            "description": f"read: at most this many messages (1-{READ_LIMIT_MAX}, default 20).",
        },
        "wait_seconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_WAIT_SECONDS,
            "description": "read: when nothing is there yet, wait up to this many seconds for "
            f"a first message (0-{MAX_WAIT_SECONDS}, default 0). An empty page means nothing "
            "new yet.",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}


def _alias_schema(kind: str, what: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            kind: {
                "type": "string",
                "description": f"The {what} to start a new conversation with. Give exactly one "
                f"of {kind} and inbox_id.",
            },
            "inbox_id": {
                "type": "string",
                "description": "Continue the conversation of this inbox (from an earlier "
                "receipt) instead of starting a new one.",
            },
            "message": {"type": "string", "description": "The message text."},
            "parts": {**_PARTS, "description": _PARTS["description"].removeprefix("send: ")},
            "submission_id": _SUBMISSION_ID,
        },
        "required": ["message"],
        "additionalProperties": False,
    }


MESSAGE_TOOLS = (
    Tool(
        "messages",
        "Agent messaging. action=send posts a message to a crew or workflow (a new "
        "conversation) or to the conversation of an inbox_id. " + _RECEIPT_NOTE + " "
        "action=read returns {messages, next_cursor}: the messages agents sent to an inbox "
        "after a cursor, oldest first; wait_seconds long-polls for the first one.",
        MESSAGES_SCHEMA,
        messages,
    ),
    Tool(
        "ask_crew",
        "Send a message to a crew: the same as messages action=send with crew. " + _RECEIPT_NOTE,
        _alias_schema("crew", "crew (its name)"),
        ask_crew,
    ),
    Tool(
        "chat",
        "Send a chat message to a workflow: the same as messages action=send with "
        "workflow. " + _RECEIPT_NOTE,
        _alias_schema("workflow", "workflow (its id)"),
        chat,
    ),
)
