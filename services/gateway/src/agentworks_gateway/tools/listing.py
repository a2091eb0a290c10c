"""The read-only `list` tool (V1), on MCP and `/api`: calls, conversations, inboxes,
targets, wake-ups, schedules, webhooks and runtimes, a page at a time.

Every kind answers `{"items": [...], "next_cursor": "..."}` ("" after the last page).
The service that owns the data decides what the caller sees (A3); the gateway's own
store holds the runtimes' credentials (`agentworks_gateway.credentials` decides whose).
The contract is in docs/mcp.md (`list`).
"""

from __future__ import annotations

from typing import Any

from agentworks.client import target_str
from agentworks.client.functions import STATE_NAMES, state_name
from agentworks.core import errors
from agentworks.core.checks import bounded, decode_time_cursor, encode_time_cursor
from agentworks.core.identity import Identity
from agentworks.core.limits import LIST_PAGE_DEFAULT, MAX_LIST_PAGE
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway import credentials
from agentworks_gateway.tools.function_views import function_dict
from agentworks_gateway.tools.messages import message_dict
from agentworks_gateway.tools.runtime_credentials import credential_dict
from agentworks_gateway.tools.schedules import schedule_dict
from agentworks_gateway.tools.toolkit import (
    Args,
    Tool,
    check_target,
    parse_time,
    timestamp,
)
from agentworks_gateway.tools.wake_ups import wake_up_dict
from agentworks_gateway.tools.webhooks import webhook_dict

_PAGING = ("cursor", "limit")
# What each kind takes besides `what`: a filter given to a kind without it is refused.
FILTERS: dict[str, tuple[str, ...]] = {
    "calls": (*_PAGING, "target", "caller", "status", "created_after", "created_before"),
    "conversations": (*_PAGING, "target", "since"),
    "inboxes": (*_PAGING, "target", "since"),
    "targets": (*_PAGING, "target"),
    "wake_ups": (*_PAGING, "conversation_id", "product", "include_finished"),
    "schedules": (*_PAGING, "conversation_id", "product"),
    "webhooks": (*_PAGING, "conversation_id", "product"),
    "runtimes": (*_PAGING, "include_revoked"),
}
OPEN = ("running", "waiting_for_input")
_RUNTIMES_CURSOR = "gr1:"

# ------------------------------------------------------------------------ translation


def call_item(call: f.CallSummary) -> dict[str, Any]:
    """A call in a list: what it is and where it is (`functions action=status` for more)."""
    return {
        "call_id": call.call_id,
        "target": target_str(call.target),
        "function": call.function,
        "caller": call.caller,
        "status": state_name(call.status),
        "progress": call.progress,
        "question": call.question,
        "created_at": timestamp(call.created_at),
        "ended_at": timestamp(call.ended_at),
    }


def conversation_item(conversation: m.ConversationSummary, since: bool) -> dict[str, Any]:
    """A conversation in a list, with its latest message and what is new."""
    last = conversation.last_message
    return {
        "conversation_id": conversation.conversation_id,
        "inbox_id": conversation.inbox_id,
        "target": target_str(conversation.target),
        "started_by": conversation.started_by,
        "created_at": timestamp(conversation.created_at),
        "message_count": conversation.message_count,
        "last_message": {
            k: v
            for k, v in message_dict(last).items()
            if k in ("message_id", "sender", "direction", "text", "created_at")
        }
        if conversation.HasField("last_message")
        else None,
        "latest_cursor": conversation.latest_cursor,
        "new_messages": conversation.new_messages if since else None,
    }


def inbox_item(conversation: m.ConversationSummary) -> dict[str, Any]:
    """An inbox in a list: the address of its conversation, bound to its principal."""
    return {
        "inbox_id": conversation.inbox_id,
        "conversation_id": conversation.conversation_id,
        "target": target_str(conversation.target),
        "principal": conversation.principal,
        "created_at": timestamp(conversation.created_at),
    }


def target_item(summary: f.TargetSummary) -> dict[str, Any]:
    """A target in a list: owner, running slots in use and free, visible functions."""
    target = summary.target
    return {
        "target": target_str(target.ref),
        "owner": target.owner,
        "running_limit": target.running_limit,
        "effective_running_limit": target.effective_running_limit,
        "running": summary.running,
        "free": summary.free,
        "functions": [
            {k: v for k, v in function_dict(fn).items() if k != "target"}
            for fn in summary.functions
        ],
        "created_at": timestamp(target.created_at),
        "updated_at": timestamp(target.updated_at),
    }


# ------------------------------------------------------------------------- handlers


def _statuses(value: str) -> list[str]:
    return list(OPEN) if value == "open" else [value]


async def _calls(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    times = {
        field: parse_time(args[field], field)
        for field in ("created_after", "created_before")
        if field in args
    }
    page = await gateway.functions(identity).list_calls(
        target=check_target(args["target"]) if "target" in args else "",
        caller=args.get("caller", ""),
        statuses=_statuses(args["status"]) if "status" in args else (),
        after=args.get("cursor", ""),
        limit=args.get("limit", 0),
        **times,
    )
    return {"items": [call_item(c) for c in page.calls], "next_cursor": page.next_cursor}


async def _conversations(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    page = await gateway.messaging(identity).list_conversations(
        target=check_target(args["target"]) if "target" in args else "",
        after=args.get("cursor", ""),
        limit=args.get("limit", 0),
        since=args.get("since", ""),
    )
    if args["what"] == "inboxes":
        items = [inbox_item(c) for c in page.conversations]
    else:
        items = [conversation_item(c, "since" in args) for c in page.conversations]
    return {"items": items, "next_cursor": page.next_cursor, "since_cursor": page.since_cursor}


async def _targets(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    page = await gateway.functions(identity).list_targets(
        target=check_target(args["target"]) if "target" in args else "",
        after=args.get("cursor", ""),
        limit=args.get("limit", 0),
    )
    return {"items": [target_item(s) for s in page.targets], "next_cursor": page.next_cursor}


async def _scheduled(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    client = gateway.scheduler(identity)
    what = args["what"]
    limit = args.get("limit", 0)
    paging = {
        "conversation_id": args.get("conversation_id", ""),
        "product": args.get("product", ""),
        "after": args.get("cursor", ""),
        "limit": limit,
    }
    items: list[dict[str, Any]]
    if what == "wake_ups":
        wake_ups = await client.list_wake_ups(
            include_finished=args.get("include_finished", False), **paging
        )
        items, cursor = [wake_up_dict(w) for w in wake_ups.wake_ups], wake_ups.next_cursor
    elif what == "schedules":
        schedules = await client.list_schedules(**paging)
        items, cursor = [schedule_dict(x) for x in schedules.schedules], schedules.next_cursor
    else:
        webhooks = await client.list_webhooks(**paging)
        items, cursor = [webhook_dict(w) for w in webhooks.webhooks], webhooks.next_cursor
    # The scheduler always answers a cursor; a short page is the last one.
    if len(items) < (limit or LIST_PAGE_DEFAULT):
        cursor = ""
    return {"items": items, "next_cursor": cursor}


async def _runtimes(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    limit = bounded(args.get("limit", 0), "limit", 1, MAX_LIST_PAGE, LIST_PAGE_DEFAULT)
    after = decode_time_cursor(args.get("cursor", ""), _RUNTIMES_CURSOR, "cursor", uuid_id=False)
    records, more = await credentials.page(
        gateway,
        identity,
        include_revoked=args.get("include_revoked", False),
        after=after,
        limit=limit,
    )
    cursor = ""
    if more:
        cursor = encode_time_cursor(_RUNTIMES_CURSOR, records[-1].created_at, records[-1].token_id)
    return {"items": [credential_dict(r) for r in records], "next_cursor": cursor}


_HANDLERS = {
    "calls": _calls,
    "conversations": _conversations,
    "inboxes": _conversations,
    "targets": _targets,
    "wake_ups": _scheduled,
    "schedules": _scheduled,
    "webhooks": _scheduled,
    "runtimes": _runtimes,
}


async def list_(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`list`: one page of what `what` names, as the caller may see it (V1, A3)."""
    what = args["what"]
    extra = sorted(set(args) - set(FILTERS[what]) - {"what"})
    if extra:
        raise errors.InvalidArgument(
            f"list what={what!r} does not take {', '.join(extra)}; it takes "
            f"{', '.join(FILTERS[what])}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(", ".join(extra), "not_taken"),
        )
    return await _HANDLERS[what](gateway, identity, args)


# -------------------------------------------------------------------------- schemas

_KINDS = "calls, conversations, inboxes, targets, wake_ups, schedules, webhooks, runtimes"

LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "what": {
            "type": "string",
            "enum": list(FILTERS),
            "description": "What to list. calls: your function calls and those on targets you "
            "own (find open ones with status=open, then cancel with the functions tool). "
            "conversations: yours and those with targets you own, each with its latest "
            "message. inboxes: the same as inbox addresses. targets: crews and workflows you "
            "own or may call, with functions and running slots in use and free. wake_ups, "
            "schedules, webhooks: those you attached and those on targets you own. "
            "runtimes: runtime credentials of your targets and when each runtime was last "
            "seen.",
        },
        "cursor": {
            "type": "string",
            "description": "The next_cursor of the previous page; omit for the first page.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_LIST_PAGE,
            "description": f"At most this many items (1-{MAX_LIST_PAGE}, default "
            f"{LIST_PAGE_DEFAULT}).",
        },
        "target": {
            "type": "string",
            "pattern": "^(crew|workflow):.+$",
            "description": "crew:<name> or workflow:<id>: only this target's calls, "
            "conversations, inboxes or target.",
        },
        "caller": {
            "type": "string",
            "description": "calls: only the calls of this principal (e.g. user:alice).",
        },
        "status": {
            "type": "string",
            "enum": [*STATE_NAMES, "open"],
            "description": "calls: only calls in this state; open = running or "
            "waiting_for_input (they hold running slots).",
        },
        "created_after": {
            "type": "string",
            "minLength": 1,
            "description": "calls: created at or after this time (ISO 8601 with an offset, "
            "2026-01-31T09:00:00Z).",
        },
        "created_before": {
            "type": "string",
            "minLength": 1,
            "description": "calls: created before this time (ISO 8601 with an offset).",
        },
        "since": {
            "type": "string",
            "description": "conversations, inboxes: the since_cursor of an earlier page: list "
            "only conversations with messages newer than it (new_messages counts them; the "
            "last few seconds may repeat, nothing is missed).",
        },
        "conversation_id": {
            "type": "string",
            "minLength": 1,
            "description": "wake_ups, schedules, webhooks: only those of this conversation.",
        },
        "product": {
            "type": "string",
            "description": "wake_ups, schedules, webhooks: only this product (crew:<name> or "
            "workflow:<id>).",
        },
        "include_finished": {
            "type": "boolean",
            "description": "wake_ups: also fired, cancelled and failed ones (default false).",
        },
        "include_revoked": {
            "type": "boolean",
            "description": "runtimes: also revoked credentials (default false).",
        },
    },
    "required": ["what"],
    "additionalProperties": False,
}

LIST_TOOL = Tool(
    "list",
    f"List what you may see, a page at a time (read-only): {_KINDS}. Returns "
    '{"items": [...], "next_cursor": "..."}; pass next_cursor back as cursor for the next '
    'page ("" means there is none). Filters apply to the kinds their descriptions name.',
    LIST_SCHEMA,
    list_,
)
