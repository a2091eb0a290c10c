"""Function tools (F1-F15, G2): `functions`, the legacy `get_crew_function_call`, and the
owner's `declarations` (HTTP API only).

Handlers translate JSON to `FunctionsClient` calls and protobuf back to JSON; the
functions service checks inputs, access (A3), limits and states.
"""

from __future__ import annotations

import uuid
from typing import Any

from agentworks.client import errors, target_str
from agentworks.client.functions import call_result
from agentworks.client.identity import Identity
from agentworks.client.structs import plain, struct_json
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.toolkit import (
    INT64_MAX,
    Args,
    Tool,
    action_rule,
    check_target,
    timestamp,
)

# Bounds the functions service states (docs/functions.md, Limits); checked here too so
# the published schema tells clients before they call.
MESSAGE_LIMIT_MAX = 200
EVENT_LIMIT_MAX = 200
READ_LIMIT_MAX = 1024 * 1024
MAX_WAIT_SECONDS = 25

# ------------------------------------------------------------------------ translation


def function_dict(fn: f.Function) -> dict[str, Any]:
    """A declared function as JSON (F1)."""
    out: dict[str, Any] = {
        "target": target_str(fn.target),
        "name": fn.name,
        "description": fn.description,
        "input_schema": struct_json(fn.input_schema),
        "output_schema": struct_json(fn.output_schema) if fn.HasField("output_schema") else None,
        "allowed_callers": list(fn.allowed_callers),
        "starts_work": fn.starts_work,
        "created_at": timestamp(fn.created_at),
        "updated_at": timestamp(fn.updated_at),
    }
    if fn.HasField("workflow"):
        out["workflow"] = {
            "route": fn.workflow.route,
            "allowed_groups": list(fn.workflow.allowed_groups),
            "variables": [_variable_dict(v) for v in fn.workflow.variables],
        }
    return out


def _variable_dict(variable: f.WorkflowVariable) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": variable.name,
        "type": variable.type,
        "required": variable.required,
    }
    if variable.HasField("default_value"):
        out["default"] = struct_json(variable.default_value)
    return out


def receipt_dict(receipt: f.CallReceipt, target: str, function: str) -> dict[str, Any]:
    """A call receipt (F4, F6): the call_id to keep, and whether the call is new."""
    return {
        "call_id": receipt.call_id,
        "status": receipt.status,
        "output_folder": receipt.output_folder,
        "created": receipt.created,
        "target": target,
        "function": function,
    }


def status_dict(status: f.CallStatus) -> dict[str, Any]:
    """A call's status view (F7): status, progress, paged messages and events, outcome, files."""
    out: dict[str, Any] = {
        "call_id": status.call_id,
        "target": target_str(status.target),
        "function": status.function,
        "status": status.status,
        "progress": status.progress,
        "question": status.question or None,
        "messages": [
            {
                "index": m.index,
                "role": m.role,
                "text": m.text,
                "created_at": timestamp(m.created_at),
            }
            for m in status.messages
        ],
        "next_after": status.next_after,
        "events": [
            {
                "index": e.index,
                "kind": e.kind,
                "text": e.text,
                **({"tool_name": e.tool_name} if e.tool_name else {}),
                "created_at": timestamp(e.created_at),
            }
            for e in status.events
        ],
        "next_after_event": status.next_after_event,
        "answer": status.answer or None,
        "has_result": status.has_result,
        "result": plain(call_result(status)) if status.has_result else None,
        "error": status.error or None,
        "files": [
            {
                "name": file.name,
                "size": file.size,
                "media_type": file.media_type,
                "sha256": file.sha256,
                "text": file.text,
                "created_at": timestamp(file.created_at),
            }
            for file in status.files
        ],
        "caller": status.caller,
        "output_folder": status.output_folder,
        "started": status.started,
        "correction_turn": status.correction_turn,
        "created_at": timestamp(status.created_at),
        "ended_at": timestamp(status.ended_at),
        "version": status.version,
    }
    if status.HasField("run") and status.run.run_id:
        out["run"] = {
            "run_id": status.run.run_id,
            "route": status.run.route,
            "steps": [
                {
                    "index": s.index,
                    "step": s.step,
                    "group": s.group,
                    "status": s.status,
                    "detail": s.detail,
                    "created_at": timestamp(s.created_at),
                }
                for s in status.run.steps
            ],
        }
    if status.HasField("source") and status.source.run_id:
        out["source"] = {
            "run_id": status.source.run_id,
            "step": status.source.step,
            "group": status.source.group,
        }
    return out


def page_dict(page: f.FilePage, call_id: str) -> dict[str, Any]:
    """One page of an output file (F8): `content` (text) or `content_base64`, `next_offset`."""
    out: dict[str, Any] = {
        "call_id": call_id,
        "file": page.file,
        "offset": page.offset,
        "size": page.size,
        "media_type": page.media_type,
    }
    if page.WhichOneof("data") == "content_base64":
        out["content_base64"] = page.content_base64
    else:
        out["content"] = page.content
    out["next_offset"] = page.next_offset if page.HasField("next_offset") else None
    return out


# ------------------------------------------------------------------------- handlers


def _function_target(args: Args) -> str:
    if args.get("crew"):
        return check_target(f"crew:{args['crew']}")
    return check_target(f"workflow:{args['workflow_id']}")


async def _status(gateway: Any, client: Any, args: Args) -> dict[str, Any]:
    status = await gateway.long_poll(
        lambda wait: client.get_status(
            args["call_id"],
            after=args.get("after", -1),
            message_limit=args.get("message_limit", 0),
            after_event=args.get("after_event", -1),
            event_limit=args.get("event_limit", 0),
            wait_seconds=wait,
            seen_version=args.get("seen_version"),
        ),
        args.get("wait_seconds", 0),
    )
    return status_dict(status)


async def _call(gateway: Any, client: Any, args: Args) -> dict[str, Any]:
    target = _function_target(args)
    wait = args.get("wait_seconds", 0)
    submission_id = args.get("submission_id", "")
    # A waiting call is asked again without the wait when the gateway drains (P4): with
    # a retry key, the caller's or one of the gateway's own, that returns the same call.
    own_key = bool(wait) and not submission_id
    if own_key:
        submission_id = f"gateway-{uuid.uuid4().hex}"
    asked = False

    def ask(wait: int) -> Any:
        # Only the first request with the gateway's key may say it is fresh: the service
        # then skips the lookup and refuses a full target at once (F5). Asking again
        # is a retry that must get the call the first request made.
        nonlocal asked
        fresh, asked = own_key and not asked, True
        return client.call(
            target,
            args["function"],
            args.get("inputs", {}),
            submission_id=submission_id,
            wait_seconds=wait,
            fresh_submission_id=fresh,
        )

    receipt = await gateway.long_poll(ask, wait)
    out = receipt_dict(receipt, target, args["function"])
    if own_key:
        out["created"] = True  # nobody else knows this key: this request created it
    if receipt.HasField("outcome"):
        out["outcome"] = status_dict(receipt.outcome)
    return out


async def _read(client: Any, args: Args) -> dict[str, Any]:
    page = await client.read_file(
        args["call_id"], args["file"], offset=args.get("offset", 0), limit=args.get("limit", 0)
    )
    return page_dict(page, args["call_id"])


async def _check_call_target(client: Any, args: Args) -> None:
    """NotFound unless the call is one of the crew or workflow the arguments name (when
    they name one: the call_id alone is enough)."""
    if "crew" not in args and "workflow_id" not in args:
        return
    target = _function_target(args)
    status = await client.get_status(args["call_id"], message_limit=1, event_limit=1)
    if target_str(status.target) != target:
        raise errors.NotFound(
            f"call {args['call_id']!r} is not a call of {target}; check the call_id and the "
            "crew or workflow_id (or leave them out: the call_id is enough)"
        )


async def functions(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`functions`: list, call, status, read, reply, cancel (F2-F15)."""
    action = args["action"]
    client = gateway.functions(identity)
    if action == "list":
        target = _function_target(args)
        listed = await client.list_functions(target)
        return {"target": target, "functions": [function_dict(fn) for fn in listed]}
    if action == "call":
        return await _call(gateway, client, args)
    await _check_call_target(client, args)
    if action == "status":
        return await _status(gateway, client, args)
    if action == "read":
        return await _read(client, args)
    if action == "reply":
        return status_dict(await client.reply(args["call_id"], args["text"]))
    return status_dict(await client.cancel(args["call_id"]))


async def get_crew_function_call(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """Legacy `get_crew_function_call`: status, or a file page when `file` is given; a
    crew or workflow_id given too must be the call's target, as for `functions` (G2, F7)."""
    if "crew" in args and "workflow_id" in args:
        # The `functions` rule's wording; the schema cannot say it here without an action.
        raise errors.InvalidArgument(
            "invalid arguments for get_crew_function_call: this tool takes at most one of "
            "crew or workflow_id (got crew, workflow_id)"
        )
    client = gateway.functions(identity)
    await _check_call_target(client, args)
    if "file" in args:
        return await _read(client, args)
    return await _status(gateway, client, args)


async def declarations(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`declarations` (owner, HTTP API only): declare or remove a function (F1)."""
    target = check_target(args["target"])
    client = gateway.functions(identity)
    if args["action"] == "remove":
        await client.remove_function(target, args["name"])
        return {"removed": True, "target": target, "name": args["name"]}
    function = await client.declare_function(
        target,
        args["name"],
        input_schema=args["input_schema"],
        description=args.get("description", ""),
        output_schema=args.get("output_schema"),
        allowed_callers=args.get("allowed_callers", ()),
        starts_work=args.get("starts_work", False),
        workflow=args.get("workflow"),
    )
    return function_dict(function)


# -------------------------------------------------------------------------- schemas

_CALL_ID = {
    "type": "string",
    "minLength": 1,
    "description": "status, read, reply, cancel (required): the call_id from the call receipt.",
}
_STATUS_PROPERTIES: dict[str, Any] = {
    "after": {
        "type": "integer",
        "minimum": -1,
        "maximum": INT64_MAX,
        "description": "status: execution messages after this index; start at -1, then pass "
        "next_after (default -1).",
    },
    "message_limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MESSAGE_LIMIT_MAX,
        "description": f"status: at most this many messages (1-{MESSAGE_LIMIT_MAX}, default 50).",
    },
    "after_event": {
        "type": "integer",
        "minimum": -1,
        "maximum": INT64_MAX,
        "description": "status: conversation events after this index; start at -1, then pass "
        "next_after_event (default -1). Raw tool arguments and results are never included.",
    },
    "event_limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": EVENT_LIMIT_MAX,
        "description": f"status: at most this many events (1-{EVENT_LIMIT_MAX}, default 50).",
    },
    "wait_seconds": {
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_WAIT_SECONDS,
        "description": "status: while the call is open and nothing is new after the cursors, "
        f"wait up to this many seconds for a change (0-{MAX_WAIT_SECONDS}, default 0). Reading "
        "never starts, steers or interrupts the execution. call: wait up to this long for "
        "the call to end; if it does, the receipt includes `outcome`, its final status.",
    },
    "seen_version": {
        "type": "integer",
        "minimum": 0,
        "maximum": INT64_MAX,
        "description": "status: the version of the last status you saw; with wait_seconds, "
        "answer at once if the call changed since then.",
    },
}
_READ_PROPERTIES: dict[str, Any] = {
    "file": {
        "type": "string",
        "minLength": 1,
        "description": "read (required): a file of the call, as listed in status files "
        "(a path inside the call's output folder, e.g. report.csv).",
    },
    "offset": {
        "type": "integer",
        "minimum": 0,
        "maximum": INT64_MAX,
        "description": "read: byte offset to start at (default 0); then pass next_offset.",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": READ_LIMIT_MAX,
        "description": f"read: at most this many bytes (1-{READ_LIMIT_MAX}, default 65536).",
    },
}
_STATUS_FIELDS = ("call_id", *_STATUS_PROPERTIES)
_READ_FIELDS = ("call_id", *_READ_PROPERTIES)
# Which crew or workflow: list and call name it; status and read (and the legacy tool)
# may, and then it is checked against the call.
_TARGET_PROPERTIES: dict[str, Any] = {
    "crew": {
        "type": "string",
        "minLength": 1,
        "description": "list, call: the crew's name. Give exactly one of crew and "
        "workflow_id (status, read, reply, cancel: optional, checked against the call).",
    },
    "workflow_id": {
        "type": "string",
        "minLength": 1,
        "description": "list, call: the workflow's id (status, read, reply, cancel: "
        "optional, checked against the call).",
    },
}

FUNCTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["list", "call", "status", "read", "reply", "cancel"],
            "description": "list: the functions you may call on a crew or workflow. call: run "
            "one with checked inputs; returns a call_id. status: the call's status, progress, "
            "messages, events, answer, result, error and files. read: a page of one of its "
            "files. reply: answer its pending question. cancel: stop it.",
        },
        **_TARGET_PROPERTIES,
        "function": {
            "type": "string",
            "minLength": 1,
            "description": "call (required): the function's name, from list.",
        },
        "inputs": {
            "type": "object",
            "description": "call: the inputs, checked against the function's input_schema "
            "before anything runs (default {}).",
        },
        "submission_id": {
            "type": "string",
            "maxLength": 200,
            "description": "call: optional retry key. Calling again with the same key returns "
            "the existing call (same call_id) instead of starting new work; the same key with "
            "other inputs is refused.",
        },
        "call_id": _CALL_ID,
        **_STATUS_PROPERTIES,
        **_READ_PROPERTIES,
        "text": {
            "type": "string",
            "minLength": 1,
            "description": "reply (required): the answer to the call's pending question.",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
    "allOf": [
        action_rule("list", ("crew", "workflow_id"), one_of=("crew", "workflow_id")),
        action_rule(
            "call",
            ("crew", "workflow_id", "function", "inputs", "submission_id", "wait_seconds"),
            required=("function",),
            one_of=("crew", "workflow_id"),
        ),
        # A call is named by its call_id; a crew or workflow_id given as well (as the
        # CLI's `functions call-status --workflow` does) must be the call's target.
        *(
            action_rule(
                action,
                (*fields, "crew", "workflow_id"),
                required=required,
                one_of=("crew", "workflow_id"),
                one_of_required=False,
            )
            for action, fields, required in (
                ("status", _STATUS_FIELDS, ("call_id",)),
                ("read", _READ_FIELDS, ("call_id", "file")),
                ("reply", ("call_id", "text"), ("call_id", "text")),
                ("cancel", ("call_id",), ("call_id",)),
            )
        ),
    ],
}

LEGACY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call_id": {**_CALL_ID, "description": "The call_id from the call receipt (required)."},
        **{
            name: {**prop, "description": prop["description"].removeprefix("status: ")}
            for name, prop in _STATUS_PROPERTIES.items()
        },
        **{
            name: {
                **prop,
                "description": prop["description"]
                .removeprefix("read (required): ")
                .removeprefix("read: "),
            }
            for name, prop in _READ_PROPERTIES.items()
        },
        # As for functions action=status and action=read (G2): optional, checked against
        # the call; the handler refuses both at once.
        "crew": {
            **_TARGET_PROPERTIES["crew"],
            "description": "Optional: the call's crew (its name), checked against the call. "
            "Give at most one of crew and workflow_id.",
        },
        "workflow_id": {
            **_TARGET_PROPERTIES["workflow_id"],
            "description": "Optional: the call's workflow (its id), checked against the call.",
        },
    },
    "required": ["call_id"],
    "additionalProperties": False,
    "dependentRequired": {"offset": ["file"], "limit": ["file"]},
    "dependentSchemas": {"file": {"propertyNames": {"enum": [*_READ_FIELDS, *_TARGET_PROPERTIES]}}},
}
LEGACY_SCHEMA["properties"]["wait_seconds"]["description"] = (
    "While the call is open and nothing is new after the cursors, wait up to this many "
    f"seconds for a change (0-{MAX_WAIT_SECONDS}, default 0)."
)
LEGACY_SCHEMA["properties"]["file"]["description"] = (
    "Read this file of the call instead of its status (with offset and limit)."
)

_VARIABLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "type": {
            "type": "string",
            "enum": ["string", "integer", "number", "boolean", "object", "array"],
        },
        "default": {},
        "required": {"type": "boolean"},
    },
    "required": ["name", "type"],
    "additionalProperties": False,
}

DECLARATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["declare", "remove"],
            "description": "declare (owner): create or replace a function. remove (owner): "
            "delete one; its calls stay readable.",
        },
        "target": {
            "type": "string",
            "pattern": "^(crew|workflow):.+$",
            "description": "crew:<name> or workflow:<id>.",
        },
        "name": {
            "type": "string",
            "minLength": 1,
            "description": "The function's name: 1-64 letters, digits, '_', '.', '-', starting "
            "with a letter.",
        },
        "description": {
            "type": "string",
            "description": "declare: what the function does, for callers (at most 4 KiB).",
        },
        "input_schema": {
            "type": "object",
            "description": "declare (required): JSON Schema 2020-12 of the inputs, an object "
            'schema; a function without inputs declares {"type": "object", '
            '"additionalProperties": false}.',
        },
        "output_schema": {
            "type": "object",
            "description": "declare: optional JSON Schema 2020-12 of the result the execution "
            "writes to FUNCTION_RESULT_FILE.",
        },
        "allowed_callers": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "maxItems": 100,
            "description": "declare: who may call besides the owner: principals (user:alice) or "
            "patterns (*, user:*, agent:*, workflow:*, service:*, agent:<crew>/*).",
        },
        "starts_work": {
            "type": "boolean",
            "description": "declare: the function only starts work and completes with its "
            "start receipt (default false).",
        },
        "workflow": {
            "type": "object",
            "properties": {
                "route": {"type": "string", "minLength": 1},
                "allowed_groups": {"type": "array", "items": {"type": "string"}},
                "variables": {"type": "array", "items": _VARIABLE},
            },
            "required": ["route"],
            "additionalProperties": False,
            "description": "declare, workflow targets (required there): {route, allowed_groups, "
            "variables: [{name, type, default?, required?}]}.",
        },
    },
    "required": ["action", "target", "name"],
    "additionalProperties": False,
    "allOf": [
        action_rule(
            "declare",
            (
                "target",
                "name",
                "description",
                "input_schema",
                "output_schema",
                "allowed_callers",
                "starts_work",
                "workflow",
            ),
            required=("input_schema",),
        ),
        action_rule("remove", ("target", "name")),
    ],
}

FUNCTION_TOOLS = (
    Tool(
        "functions",
        "Declared functions of crews and workflows: isolated, tracked executions with checked "
        "inputs. action=list shows the functions you may call (crew or workflow_id). "
        "action=call runs one and returns {call_id, ...} at once; keep the call_id. "
        "action=status returns status (running, waiting_for_input, completed, failed, "
        "interrupted, cancelled), progress, execution messages (after/next_after, start -1), "
        "events (after_event/next_after_event), answer, result, error, files and a pending "
        "question. action=read returns a page of a file: content (text) or content_base64, "
        "and next_offset while more remains. action=reply answers the pending question; "
        "action=cancel stops the call. A full target answers RESOURCE_EXHAUSTED (busy): "
        "retry later.",
        FUNCTIONS_SCHEMA,
        functions,
    ),
    Tool(
        "get_crew_function_call",
        "Legacy: the status of a function call (same fields as functions action=status), or "
        "with file (and offset, limit) a page of one of its files (as functions action=read).",
        LEGACY_SCHEMA,
        get_crew_function_call,
    ),
    Tool(
        "declarations",
        "Declare or remove a function of a crew or workflow (owner tool, HTTP API only).",
        DECLARATIONS_SCHEMA,
        declarations,
        mcp=False,
    ),
)
