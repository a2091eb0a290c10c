"""The tool registry: one definition per tool, served over MCP (G1, G2) and `/api` alike.

Each tool has a name, a description, a JSON Schema for its arguments and a handler
`handler(gateway, identity, args) -> dict`. MCP `tools/call`, `POST /api/v1/tools/<name>`
and the stdio proxy all go through `call_tool`, so the arguments, the structured result
and the error texts are the same everywhere. Handlers only translate between JSON and
the typed clients; the services own every business rule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from google.protobuf import json_format
from prometheus_client import Counter, Histogram

from agentworks.client import errors, target_str
from agentworks.client.checks import check_json_depth
from agentworks.client.identity import Identity
from agentworks.common.v1 import common_pb2
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.function_tools import FUNCTION_TOOLS
from agentworks_gateway.scheduler_tools import SCHEDULER_TOOLS
from agentworks_gateway.toolkit import (
    JSON_PAYLOADS,
    Args,
    Handler,
    Tool,
    check_target,
    describe_faults,
    number_faults,
    text_faults,
)
from agentworks_gateway.toolkit import timestamp as _timestamp

__all__ = ["TOOLS", "Args", "Handler", "Tool", "call_tool", "check_arguments", "find_tool"]

log = structlog.get_logger("agentworks.gateway.tools")

TOOL_CALLS = Counter(
    "agentworks_gateway_tool_calls_total",
    "Tool calls served by the gateway, by tool, surface (mcp/api) and outcome (ok, a status "
    "name, or cancelled: cut at the end of a drain, or its client went away).",
    ["tool", "surface", "outcome"],
)
TOOL_DURATION = Histogram(
    "agentworks_gateway_tool_duration_seconds",
    "Tool call handling time (long-polls included), by tool.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


# ------------------------------------------------------------------------ translation


def receipt_dict(receipt: m.SendReceipt) -> dict[str, Any]:
    """A send receipt (C2) as JSON."""
    return {
        "accepted": receipt.accepted,
        "message_id": receipt.message_id,
        "conversation_id": receipt.conversation_id,
        "inbox_id": receipt.inbox_id,
    }


def parts_list(parts: Iterable[common_pb2.Part]) -> list[dict[str, Any]]:
    """Structured message parts as JSON: `{"text": ...}` or `{"data": {...}}`."""
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.WhichOneof("content") == "data":
            out.append({"data": json_format.MessageToDict(part.data)})
        else:
            out.append({"text": part.text})
    return out


def parts_proto(parts: Iterable[Mapping[str, Any]]) -> list[common_pb2.Part]:
    """JSON parts (already schema-checked) as protobuf parts."""
    out = []
    for part in parts:
        if "data" in part:
            out.append(common_pb2.Part(data=part["data"]))
        else:
            out.append(common_pb2.Part(text=part["text"]))
    return out


def message_dict(message: m.Message) -> dict[str, Any]:
    """A conversation message as JSON."""
    out: dict[str, Any] = {
        "message_id": message.message_id,
        "conversation_id": message.conversation_id,
        "inbox_id": message.inbox_id,
        "sender": message.sender,
        "text": message.text,
        "created_at": _timestamp(message.created_at),
        "direction": message.direction,
    }
    if message.parts:
        out["parts"] = parts_list(message.parts)
    return out


def target_dict(target: m.Target) -> dict[str, Any]:
    """A crew or workflow registration (C1) as JSON; free_text_ask is on unless false."""
    caps = target.capabilities
    return {
        "target": target_str(target.ref),
        "owner": target.owner,
        "capabilities": {
            "free_text_ask": caps.free_text_ask if caps.HasField("free_text_ask") else True
        },
        "created_at": _timestamp(target.created_at),
        "updated_at": _timestamp(target.updated_at),
    }


# --------------------------------------------------------------------------- checks


def _check_fields(tool: str, action: str, args: Args, allowed: Iterable[str]) -> None:
    """Refuse arguments that belong to another action, so a mistake is never ignored."""
    extra = sorted(set(args) - set(allowed) - {"action"})
    if extra:
        raise errors.InvalidArgument(
            f"{tool} action {action!r} does not take {', '.join(extra)}; "
            f"it takes {', '.join(sorted(allowed))}"
        )


def _require(tool: str, action: str, args: Args, *names: str) -> None:
    missing = [n for n in names if args.get(n) in (None, "")]
    if missing:
        raise errors.InvalidArgument(f"{tool} action {action!r} needs {', '.join(missing)}")


def _one_destination(tool: str, args: Args, names: tuple[str, ...]) -> str:
    given = [n for n in names if args.get(n)]
    if len(given) != 1:
        listed = ", ".join(names[:-1]) + " or " + names[-1]
        got = f" (got {', '.join(given)})" if given else ""
        starters = " or ".join(n for n in names if n != "inbox_id")
        raise errors.InvalidArgument(
            f"{tool} needs exactly one of {listed}{got}: a {starters} starts a new "
            "conversation, an inbox_id continues one"
        )
    return given[0]


# ------------------------------------------------------------------------- handlers

_SEND_FIELDS = ("crew", "workflow", "inbox_id", "message", "parts", "submission_id")
_READ_FIELDS = ("inbox_id", "after", "limit", "wait_seconds")


async def _send(
    gateway: Any, identity: Identity, tool: str, args: Args, destinations: tuple[str, ...]
) -> dict[str, Any]:
    destination = _one_destination(tool, args, destinations)
    message = args.get("message", "")
    if not message.strip() and not args.get("parts"):
        raise errors.InvalidArgument("message is empty: send some text or at least one part")
    client = gateway.messaging(identity)
    receipt = await client.send(
        message,
        target=None if destination == "inbox_id" else f"{destination}:{args[destination]}",
        inbox_id=args.get("inbox_id"),
        submission_id=args.get("submission_id", ""),
        parts=parts_proto(args.get("parts", ())),
    )
    return receipt_dict(receipt)


async def messages(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`messages`: send (C2-C4) or read (C7)."""
    action = args["action"]
    if action == "send":
        _check_fields("messages", action, args, _SEND_FIELDS)
        return await _send(
            gateway, identity, "messages send", args, ("crew", "workflow", "inbox_id")
        )
    _check_fields("messages", action, args, _READ_FIELDS)
    _require("messages", action, args, "inbox_id")
    client = gateway.messaging(identity)
    response = await gateway.long_poll(
        lambda wait: client.read(
            args["inbox_id"],
            after=args.get("after", ""),
            limit=args.get("limit", 0),
            wait_seconds=wait,
        ),
        args.get("wait_seconds", 0),
    )
    return {
        "messages": [message_dict(msg) for msg in response.messages],
        "next_cursor": response.next_cursor,
    }


async def ask_crew(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`ask_crew`: send to a crew (C9)."""
    return await _send(gateway, identity, "ask_crew", args, ("crew", "inbox_id"))


async def chat(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`chat`: send to a workflow (C9)."""
    return await _send(gateway, identity, "chat", args, ("workflow", "inbox_id"))


async def _functions_registration(gateway: Any, identity: Identity, target: str) -> Any:
    """The target's registration with the functions service, or None if it has none."""
    try:
        return await gateway.functions(identity).get_target(target)
    except errors.NotFound:
        return None


def _with_limits(result: dict[str, Any], registration: Any) -> dict[str, Any]:
    """A target's JSON with the functions service's running limit (F5) added."""
    result["running_limit"] = registration.running_limit if registration else None
    result["effective_running_limit"] = (
        registration.effective_running_limit if registration else None
    )
    return result


async def _register_functions(
    gateway: Any, identity: Identity, target: str, owner: str, running_limit: int
) -> Any:
    try:
        return await gateway.functions(identity).register_target(
            target, owner=owner, running_limit=running_limit
        )
    except errors.AgentWorksError as exc:
        # Messaging has it already; registering again replaces both, so a retry is safe.
        raise type(exc)(
            f"{target} is registered for messaging but not with the functions service: "
            f"{exc.message}; run the same `targets register` again once that is fixed"
        ) from None


async def targets(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`targets`: register, update, set_limit or get a crew or workflow (C1, F5).

    Each service keeps its own copy of a target: register writes the owner and
    free_text_ask to messaging, then the owner and running limit to functions.
    """
    action = args["action"]
    target = check_target(args.get("target", ""))
    client = gateway.messaging(identity)
    if action == "register":
        _check_fields(
            "targets", action, args, ("target", "owner", "free_text_ask", "running_limit")
        )
        _require("targets", action, args, "owner")
        result = await client.register_target(
            target, owner=args["owner"], free_text_ask=args.get("free_text_ask")
        )
        registration = await _register_functions(
            gateway, identity, target, args["owner"], args.get("running_limit", 0)
        )
        return _with_limits(target_dict(result), registration)
    if action == "update":
        _check_fields("targets", action, args, ("target", "free_text_ask"))
        _require("targets", action, args, "free_text_ask")
        # Messaging's setting only: a functions outage must not hide that it changed.
        return target_dict(await client.update_target(target, free_text_ask=args["free_text_ask"]))
    if action == "set_limit":
        _check_fields("targets", action, args, ("target", "running_limit"))
        _require("targets", action, args, "running_limit")
        result = await client.get_target(target)
        current = await _functions_registration(gateway, identity, target)
        registration = await gateway.functions(identity).register_target(
            target,
            owner=current.owner if current else result.owner,
            running_limit=args["running_limit"],
        )
        return _with_limits(target_dict(result), registration)
    _check_fields("targets", action, args, ("target",))
    result = await client.get_target(target)
    registration = await _functions_registration(gateway, identity, target)
    return _with_limits(target_dict(result), registration)


async def tokens(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`tokens`: create, list or revoke API tokens (A1)."""
    action = args["action"]
    if action == "create":
        _check_fields("tokens", action, args, ("principal", "roles", "label"))
        _require("tokens", action, args, "principal")
        token, record = await gateway.create_token(
            identity,
            principal=args["principal"],
            roles=args.get("roles", ()),
            label=args.get("label", ""),
        )
        return {"token": token, **record.to_dict()}
    if action == "list":
        _check_fields("tokens", action, args, ("include_revoked",))
        records = await gateway.list_tokens(
            identity, include_revoked=args.get("include_revoked", False)
        )
        return {"tokens": [r.to_dict() for r in records]}
    _check_fields("tokens", action, args, ("token_id",))
    _require("tokens", action, args, "token_id")
    return (await gateway.revoke_token(identity, args["token_id"])).to_dict()


# -------------------------------------------------------------------------- schemas

_PARTS = {
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
_SUBMISSION_ID = {
    "type": "string",
    "maxLength": 200,
    "description": "Optional retry key. Sending again with the same key returns the original "
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
            "maximum": 100,
            "description": "read: at most this many messages (1-100, default 20).",
        },
        "wait_seconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": 25,
            "description": "read: when nothing is there yet, wait up to this many seconds for "
            "a first message (0-25, default 0). An empty page means nothing new yet.",
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


TARGETS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["register", "update", "set_limit", "get"],
            "description": "register (operator): create or replace a crew or workflow with its "
            "owner, for messaging and for functions. update (owner or operator): change its "
            "capabilities. set_limit (operator): change its running limit. get: show it.",
        },
        "target": {
            "type": "string",
            "pattern": "^(crew|workflow):.+$",
            "description": "crew:<name> or workflow:<id>.",
        },
        "owner": {
            "type": "string",
            "description": "register (required): the owning principal, e.g. user:alice.",
        },
        "free_text_ask": {
            "type": "boolean",
            "description": "register, update: the 'Agent messaging' setting; on unless false. "
            "When false, programmatic messages to the target are refused.",
        },
        "running_limit": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000,
            "description": "register, set_limit (required there): how many function calls may "
            "run at once; 0 = the functions service's default. At the limit a new call is "
            "refused as busy.",
        },
    },
    "required": ["action", "target"],
    "additionalProperties": False,
}

TOKENS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "revoke"],
            "description": "create: a new API token (the secret is returned once). list: every "
            "token, without secrets. revoke: a token by id, effective immediately.",
        },
        "principal": {
            "type": "string",
            "description": "create (required): who the token acts as: user:<name>, "
            "agent:<crew>/<agent>, workflow:<id> or service:<name>.",
        },
        "roles": {
            "type": "array",
            "items": {"type": "string", "enum": ["operator"]},
            "uniqueItems": True,
            "description": "create: roles of the token; 'operator' may register targets and "
            "manage tokens.",
        },
        "label": {
            "type": "string",
            "maxLength": 200,
            "description": "create: a note saying what the token is for.",
        },
        "include_revoked": {
            "type": "boolean",
            "description": "list: include revoked tokens (default false).",
        },
        "token_id": {"type": "string", "description": "revoke (required): the token id (tok_...)."},
    },
    "required": ["action"],
    "additionalProperties": False,
}

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
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
            "Send a message to a crew: the same as messages action=send with crew. "
            + _RECEIPT_NOTE,
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
        Tool(
            "targets",
            "Register, update, set the running limit of, or get a crew or workflow (operator "
            "tool, HTTP API only).",
            TARGETS_SCHEMA,
            targets,
            mcp=False,
        ),
        Tool(
            "tokens",
            "Create, list or revoke API tokens (operator tool, HTTP API only).",
            TOKENS_SCHEMA,
            tokens,
            mcp=False,
        ),
        *FUNCTION_TOOLS,
        *SCHEDULER_TOOLS,
    )
}
for _tool in TOOLS.values():
    _ = _tool.validator  # compile (and check) every schema at import


def mcp_tools() -> list[Tool]:
    """The tools served over MCP, in a stable order."""
    return [t for t in TOOLS.values() if t.mcp]


def find_tool(name: str, *, mcp: bool) -> Tool:
    """The tool called `name` on this surface, or NotFound naming the ones there are."""
    tool = TOOLS.get(name)
    if tool is None or (mcp and not tool.mcp):
        available = [t.name for t in (mcp_tools() if mcp else TOOLS.values())]
        raise errors.NotFound(f"unknown tool {name!r}: the tools are {', '.join(available)}")
    return tool


def check_arguments(tool: Tool, args: Any) -> Args:
    """The arguments if they match the tool's schema; else InvalidArgument listing each fault."""
    if not isinstance(args, dict):
        raise errors.InvalidArgument(
            f"arguments of {tool.name} must be a JSON object, got {type(args).__name__}"
        )
    for name in JSON_PAYLOADS:  # first: the checks below walk the JSON recursively
        if name in args:
            try:
                check_json_depth(args[name], name)
            except errors.InvalidArgument as exc:
                raise errors.InvalidArgument(
                    f"invalid arguments for {tool.name}: {exc.message}"
                ) from None
    faults = describe_faults(tool.input_schema, tool.validator.iter_errors(args), args)
    if not faults:  # the shape is right: now what no service can take
        faults = text_faults(args) + [
            fault
            for name in JSON_PAYLOADS
            if name in args
            for fault in number_faults(args[name], name)
        ]
    if faults:
        raise errors.InvalidArgument(f"invalid arguments for {tool.name}: " + "; ".join(faults))
    # JSON Schema counts 2.0 as an integer; the services' integer fields take only ints.
    properties = tool.input_schema.get("properties", {})
    return {
        name: int(value)
        if isinstance(value, float) and properties.get(name, {}).get("type") == "integer"
        else value
        for name, value in args.items()
    }


async def call_tool(
    gateway: Any, identity: Identity, name: str, args: Any, *, mcp: bool
) -> dict[str, Any]:
    """Run one tool call as `identity`; raises AgentWorksError subclasses on refusal."""
    started = time.monotonic()
    outcome = "ok"
    try:
        tool = find_tool(name, mcp=mcp)
        return await tool.handler(gateway, identity, check_arguments(tool, args))
    except errors.AgentWorksError as exc:
        outcome = exc.code.name
        raise
    except Exception:
        outcome = "INTERNAL"
        raise
    except asyncio.CancelledError:
        # The drain ended with the call still running, or its client went away.
        outcome = "cancelled"
        raise
    finally:
        elapsed = time.monotonic() - started
        if name in TOOLS:  # unknown names stay out of the label set
            surface = "mcp" if mcp else "api"
            TOOL_CALLS.labels(name, surface, outcome).inc()
            TOOL_DURATION.labels(name).observe(elapsed)
        log.info(
            "tool.called",
            tool=name,
            action=args.get("action") if isinstance(args, dict) else None,
            principal=identity.principal,
            surface="mcp" if mcp else "api",
            outcome=outcome,
            ms=round(elapsed * 1000, 1),
        )
