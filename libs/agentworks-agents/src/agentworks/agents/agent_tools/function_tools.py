"""The function tools, the same in a turn and in an execution (L1, F2-F11, F13, L8):
list_functions, call_function, get_function_call, reply_function_call."""

from __future__ import annotations

from typing import Any

from agentworks.agents.agent_tools import views
from agentworks.agents.agent_tools.schemas import (
    CALL_ID,
    CALL_RECEIPT,
    CALL_STATUS,
    TARGET,
    WAIT_SECONDS,
    identifier,
    integer,
    obj,
    text,
)
from agentworks.agents.agent_tools.toolbox import AgentTool, ToolError, ToolHandler, unavailable
from agentworks.core import errors, limits, progress
from agentworks.core.jsontext import loads

LIST_FUNCTIONS = AgentTool(
    name="list_functions",
    title="List a target's functions",
    description=(
        "List the declared functions you may call on a crew or workflow, with each one's "
        "description and input JSON Schema. Use it before call_function to learn a "
        "function's name and inputs."
    ),
    input_schema=obj({"target": TARGET}, ("target",)),
    output_schema={
        "type": "object",
        "properties": {
            "functions": {
                "type": "array",
                "items": {"type": "object"},
                "description": "Each function you may call: target, name, description, "
                "input_schema, output_schema, starts_work.",
            }
        },
        "required": ["functions"],
    },
    read_only=True,
    destructive=False,
    idempotent=True,
)

_CALL_PROPERTIES: dict[str, dict[str, Any]] = {
    "target": TARGET,
    "function": {
        "type": "string",
        "description": "The function's name, as list_functions shows it.",
        "minLength": 1,
        "maxLength": 64,
    },
    "inputs": {
        "type": "string",
        "description": "The inputs as JSON text of an object meeting the function's input "
        "schema (list_functions shows it), e.g. '{\"text\": \"hello\"}'; null or '{}' "
        "for none. Checked before the call starts.",
        "maxLength": limits.MAX_INPUTS_BYTES,
    },
    "wait_seconds": WAIT_SECONDS,
}

_CALL_TEXT = (
    "Call a declared function on a crew or workflow. It runs as a fresh isolated "
    "execution; this returns a receipt with its call_id at once (or its outcome when it "
    "ends within wait_seconds). Keep the call_id and read the call with "
    "get_function_call. "
)

CALL_FUNCTION_TURN = AgentTool(
    name="call_function",
    title="Call a function",
    description=_CALL_TEXT
    + "When the call ends, a function_completed delivery comes back into this "
    "conversation as a later turn: you need not wait for it now. Give the same "
    "submission_id to retry a call whose receipt you did not get: you get the same "
    "call, never a second one.",
    input_schema=obj(
        {
            **_CALL_PROPERTIES,
            "submission_id": identifier(
                "Optional retry key: the same key returns the existing call."
            ),
        },
        ("target", "function"),
    ),
    output_schema=CALL_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
    json_text=("inputs",),
)

CALL_FUNCTION_EXECUTION = AgentTool(
    name="call_function",
    title="Call a function",
    description=_CALL_TEXT
    + "Poll get_function_call until its status is completed, failed, interrupted or "
    "cancelled. In a workflow step the call is keyed by the run, the step and the group, "
    "so a retried step gets the existing call instead of starting another.",
    input_schema=obj(
        {
            **_CALL_PROPERTIES,
            "step": identifier("The workflow step making the call (workflow runs)."),
            "group": identifier("The group within the step, when the step fans out."),
        },
        ("target", "function"),
    ),
    output_schema=CALL_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
    json_text=("inputs",),
)

GET_FUNCTION_CALL = AgentTool(
    name="get_function_call",
    title="Read a function call",
    description=(
        "Read a call's status (running, waiting_for_input, completed, failed, "
        "interrupted, cancelled), progress, pending question, execution messages after "
        "the 'after' cursor, final answer, validated result, error and output files. "
        "Reading never starts, steers or interrupts the call. Progress or a question "
        "does not mean the call is done: only its status does."
    ),
    input_schema=obj(
        {
            "call_id": CALL_ID,
            "after": integer(
                "Message cursor: -1 (the default) for the first messages, then the "
                "next_after of the previous read.",
                -1,
                2**62,
            ),
            "message_limit": integer("At most this many messages (1-200).", 1, 200),
        },
        ("call_id",),
    ),
    output_schema=CALL_STATUS,
    read_only=True,
    destructive=False,
    idempotent=True,
)

REPLY_FUNCTION_CALL = AgentTool(
    name="reply_function_call",
    title="Answer a call's question",
    description=(
        "Answer the human-input question a call you made is waiting_for_input on "
        "(get_function_call shows it); the execution then goes on."
    ),
    input_schema=obj(
        {"call_id": CALL_ID, "text": text("Your answer.", limits.MAX_REPLY_BYTES)},
        ("call_id", "text"),
    ),
    output_schema=CALL_STATUS,
    read_only=False,
    destructive=False,
    idempotent=False,
)


def inputs(given: str | None) -> dict[str, Any]:
    """call_function's inputs from their JSON text (L10: a string keeps the tool strict
    whatever the function's schema); a ToolError saying what is wrong with the text."""
    if not given or not given.strip():
        return {}
    try:
        value = loads(given, "inputs")
    except errors.InvalidArgument as exc:
        raise ToolError(f"invalid arguments for call_function: {exc.message}") from None
    if not isinstance(value, dict):
        raise ToolError(
            "invalid arguments for call_function: inputs must be the JSON text of an "
            f'object, e.g. \'{{"text": "hello"}}\', got {type(value).__name__}'
        )
    return value


def function_tools(ctx: Any, *, execution: bool) -> list[tuple[AgentTool, ToolHandler]]:
    """The four function tools bound to a TurnContext or an ExecutionContext."""
    where = "ExecutionContext" if execution else "TurnContext"

    def method(name: str) -> Any:
        found = getattr(ctx, name, None)
        if found is None:
            raise unavailable(name, f"{where}.{name}")
        return found

    async def list_functions(args: dict[str, Any]) -> dict[str, Any]:
        found = await method("list_functions")(args["target"])
        return {"functions": [views.function(fn) for fn in found]}

    async def call_function(args: dict[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {"wait_seconds": args.get("wait_seconds", 0)}
        for key in ("submission_id", "step", "group"):
            if args.get(key):
                options[key] = args[key]
        receipt = await progress.waiting(  # progress over MCP when asked (N3)
            method("call_function")(
                args["target"], args["function"], inputs(args.get("inputs")), **options
            ),
            "waiting for the call to end",
            bound=options["wait_seconds"],
        )
        return views.call_receipt(receipt)

    async def get_function_call(args: dict[str, Any]) -> dict[str, Any]:
        get = method("get_function_call")
        options = {k: args[k] for k in ("after", "message_limit") if k in args}
        status = await get(args["call_id"], **options) if options else await get(args["call_id"])
        return views.call_status(status)

    async def reply_function_call(args: dict[str, Any]) -> dict[str, Any]:
        status = await method("reply_function_call")(args["call_id"], args["text"])
        return views.call_status(status)

    return [
        (LIST_FUNCTIONS, list_functions),
        (CALL_FUNCTION_EXECUTION if execution else CALL_FUNCTION_TURN, call_function),
        (GET_FUNCTION_CALL, get_function_call),
        (REPLY_FUNCTION_CALL, reply_function_call),
    ]
