"""The `wake_ups` tool (S1), HTTP API only: create, list, get, cancel, reschedule."""

from __future__ import annotations

from typing import Any

from agentworks.core.identity import Identity
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks_gateway.tools.scheduling import (
    AFTER_CURSOR,
    LIST_FIELDS,
    LIST_LIMIT,
    PRODUCT,
    TIME,
    id_schema,
    list_args,
    submission_id_schema,
)
from agentworks_gateway.tools.toolkit import (
    INT64_MAX,
    Args,
    Tool,
    action_rule,
    parse_time,
    timestamp,
)

# ------------------------------------------------------------------------ translation


def _status_name(value: int) -> str:
    return s.WakeUpStatus.Name(value).removeprefix("WAKE_UP_STATUS_").lower()


def wake_up_dict(wake_up: s.WakeUp) -> dict[str, Any]:
    """A wake-up (S1) as JSON; status is pending, fired, cancelled or failed."""
    return {
        "wake_up_id": wake_up.wake_up_id,
        "conversation_id": wake_up.conversation_id,
        "status": _status_name(wake_up.status),
        "due_at": timestamp(wake_up.due_at),
        "note": wake_up.note,
        "product": wake_up.product,
        "created_by": wake_up.created_by,
        "created_at": timestamp(wake_up.created_at),
        "fired_at": timestamp(wake_up.fired_at),
        "delivery_id": wake_up.delivery_id or None,
        "late_seconds": wake_up.late_seconds,
        "error": wake_up.error or None,
    }


# ------------------------------------------------------------------------- handlers


def _when(args: Args) -> dict[str, Any]:
    if "at" in args:
        return {"at": parse_time(args["at"], "at")}
    return {"delay_seconds": args["delay_seconds"]}


async def wake_ups(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`wake_ups`: create, list, get, cancel, reschedule (S1)."""
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "create":
        return wake_up_dict(
            await client.create_wake_up(
                args["conversation_id"],
                note=args.get("note", ""),
                product=args.get("product", ""),
                submission_id=args.get("submission_id"),
                **_when(args),
            )
        )
    if action == "list":
        page = await client.list_wake_ups(
            include_finished=args.get("include_finished", False), **list_args(args)
        )
        return {
            "wake_ups": [wake_up_dict(w) for w in page.wake_ups],
            "next_cursor": page.next_cursor,
        }
    if action == "get":
        return wake_up_dict(await client.get_wake_up(args["wake_up_id"]))
    if action == "cancel":
        return wake_up_dict(await client.cancel_wake_up(args["wake_up_id"]))
    return wake_up_dict(await client.reschedule_wake_up(args["wake_up_id"], **_when(args)))


# -------------------------------------------------------------------------- schemas

WAKE_UPS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "get", "cancel", "reschedule"],
            "description": "create: a durable wake-up that prompts a conversation's agents "
            "again (operators, or the agents serving the conversation's target). list: "
            "wake-ups you may see (pending unless include_finished). get: one. cancel: stop "
            "a pending one. reschedule: give a pending one a new time.",
        },
        "wake_up_id": id_schema("wake-up id", "get, cancel, reschedule"),
        "conversation_id": {
            "type": "string",
            "minLength": 1,
            "description": "create (required): the conversation it prompts; list: only the "
            "wake-ups of this conversation.",
        },
        "product": PRODUCT,
        "note": {
            "type": "string",
            "description": "create: the text the agents get with the wake-up (at most 16 KiB).",
        },
        "submission_id": submission_id_schema("wake-up"),
        "include_finished": {
            "type": "boolean",
            "description": "list: also fired, cancelled and failed wake-ups (default false).",
        },
        "after": AFTER_CURSOR,
        "limit": LIST_LIMIT,
        "at": {
            **TIME,
            "description": "create, reschedule: the time, ISO 8601 with an offset "
            "(2026-01-31T09:00:00Z); at most 1 hour past, 400 days ahead. Give at or "
            "delay_seconds.",
        },
        "delay_seconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": INT64_MAX,
            "description": "create, reschedule: fire this many seconds from now (0 = next tick).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

WAKE_UPS_ACTIONS = (
    action_rule(
        "create",
        ("conversation_id", "at", "delay_seconds", "note", "product", "submission_id"),
        required=("conversation_id",),
        one_of=("at", "delay_seconds"),
    ),
    action_rule("list", (*LIST_FIELDS, "include_finished")),
    action_rule("get", ("wake_up_id",), required=("wake_up_id",)),
    action_rule("cancel", ("wake_up_id",), required=("wake_up_id",)),
    action_rule(
        "reschedule",
        ("wake_up_id", "at", "delay_seconds"),
        required=("wake_up_id",),
        one_of=("at", "delay_seconds"),
    ),
)

WAKE_UP_TOOL = Tool(
    "wake_ups",
    "Create, list, get, cancel or reschedule durable wake-ups (HTTP API only).",
    WAKE_UPS_SCHEMA,
    wake_ups,
    mcp=False,
    actions=WAKE_UPS_ACTIONS,
)
