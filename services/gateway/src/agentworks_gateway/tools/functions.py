"""Function tools (F2-F15, G2): `functions` (list, call, status, read, reply, cancel) and
the legacy `get_crew_function_call`.

Handlers translate JSON to `FunctionsClient` calls and protobuf back to JSON
(`function_views`); the functions service checks inputs, access (A3), limits and states.
"""

from __future__ import annotations

import uuid
from typing import Any

from agentworks.client import target_str
from agentworks.core import errors, progress
from agentworks.core.identity import Identity
from agentworks_gateway.tools.function_schemas import (
    FUNCTIONS_ACTIONS,
    FUNCTIONS_SCHEMA,
    LEGACY_READ_FIELDS,
    LEGACY_SCHEMA,
    LEGACY_STATUS_FIELDS,
)
from agentworks_gateway.tools.function_views import (
    function_dict,
    page_dict,
    receipt_dict,
    status_dict,
)
from agentworks_gateway.tools.toolkit import Args, Tool, check_target


def _function_target(args: Args) -> str:
    if args.get("crew"):
        return check_target(f"crew:{args['crew']}")
    return check_target(f"workflow:{args['workflow_id']}")


async def _status(gateway: Any, client: Any, args: Args) -> dict[str, Any]:
    wait = args.get("wait_seconds", 0)
    status = await progress.waiting(  # progress over MCP when asked (N3)
        gateway.long_poll(
            lambda wait: client.get_status(
                args["call_id"],
                after=args.get("after", -1),
                message_limit=args.get("message_limit", 0),
                after_event=args.get("after_event", -1),
                event_limit=args.get("event_limit", 0),
                wait_seconds=wait,
                seen_version=args.get("seen_version"),
            ),
            wait,
        ),
        "waiting for the call to change",
        bound=wait,
    )
    return status_dict(status)


async def _call(gateway: Any, client: Any, args: Args) -> dict[str, Any]:
    target = _function_target(args)
    wait = args.get("wait_seconds", 0)
    submission_id = args.get("submission_id", "")
    # A waiting call is asked again without the wait when the gateway drains (P4): with
    # a retry key, the caller's or one of the gateway's own, that returns the same call.
    # Translation, not a rule of calls: the gateway is then the sender of a repeated
    # request, and making its own repeat safe is the sender's job (as SchedulerClient's
    # per-call retry keys do for the channel's retries). What a key means (the same call
    # back, other inputs refused, a full target busy at once for a key never sent
    # before) is decided by functions alone; the gateway only says its key is new.
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

    receipt = await progress.waiting(  # progress over MCP when asked (N3)
        gateway.long_poll(ask, wait), "waiting for the call to end", bound=wait
    )
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
    they name one: the call_id alone is enough).

    Translation of an address: the MCP tools (the legacy `get_crew_function_call` first)
    may address a call as crew or workflow plus call_id, while functions addresses it by
    call_id alone (A3 decides who sees it). A pair that names no call is not found. This
    costs a status read; it would move to functions if its GetStatus, ReadFile, Reply and
    Cancel took the target the caller expects (a proto change, not made here).
    """
    if "crew" not in args and "workflow_id" not in args:
        return
    target = _function_target(args)
    status = await client.get_status(args["call_id"], message_limit=1, event_limit=1)
    if target_str(status.target) != target:
        raise errors.NotFound(
            f"call {args['call_id']!r} is not a call of {target}; check the call_id and the "
            "crew or workflow_id (or leave them out: the call_id is enough)",
            reason=errors.Reason.NOT_FOUND,
            metadata={"kind": "call", "id": args["call_id"], "target": target},
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


def _legacy_faults(args: Args) -> list[str]:
    """The legacy tool's two modes, worded as `functions`' action rules are: with `file`
    a read (`offset`, `limit` need it), without it a status; at most one target."""
    faults = []
    if "crew" in args and "workflow_id" in args:
        faults.append("this tool takes at most one of crew or workflow_id (got crew, workflow_id)")
    if "file" in args:
        foreign = [name for name in args if name not in LEGACY_READ_FIELDS]
        if foreign:
            faults.append(
                f"a read (with file) does not take {', '.join(foreign)}; "
                f"it takes {', '.join(LEGACY_READ_FIELDS)}"
            )
    else:
        faults += [f"{n} needs file too" for n in args if n not in LEGACY_STATUS_FIELDS]
    return faults


async def get_crew_function_call(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """Legacy `get_crew_function_call`: status, or a file page when `file` is given; a
    crew or workflow_id given too must be the call's target, as for `functions` (G2, F7)."""
    client = gateway.functions(identity)
    await _check_call_target(client, args)
    if "file" in args:
        return await _read(client, args)
    return await _status(gateway, client, args)


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
        "retry later. Hosts ask before each use of this tool, since cancel ends a call: "
        "to read without asking, use the read-only tools get_crew_function_call (status, "
        "read) and list (what=targets: the functions you may call; what=calls).",
        FUNCTIONS_SCHEMA,
        functions,
        actions=FUNCTIONS_ACTIONS,
    ),
    Tool(
        "get_crew_function_call",
        "Read-only: the status of a function call (same fields as functions action=status), "
        "or with file (and offset, limit) a page of one of its files (as functions "
        "action=read). Hosts need not ask before it, as they must for functions.",
        LEGACY_SCHEMA,
        get_crew_function_call,
        faults=_legacy_faults,
    ),
)
