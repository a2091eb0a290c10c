"""The tools of an execution (L1, F7, F9-F11, F14): progress, messages, events, workflow
steps, a human-input question, and the function tools.

There is no return_function_result tool: the result is JSON the agent writes to the file
FUNCTION_RESULT_FILE names, and the platform validates it when the execution ends (F10).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentworks.agents.agent_tools.function_tools import function_tools
from agentworks.agents.agent_tools.schemas import OK, enum, integer, obj, text
from agentworks.agents.agent_tools.toolbox import AgentTool, Toolbox
from agentworks.core import limits, progress

if TYPE_CHECKING:
    from agentworks.runtime.execution_context import ExecutionContext

# The closed sets of the execution tools (L10): enums, so a strict model picks one.
MESSAGE_ROLES = ("assistant", "user", "system", "tool")
EVENT_KINDS = ("note", "decision", "assistant", "tool_call", "tool_result", "warning", "error")
STEP_STATUSES = ("started", "completed", "failed", "skipped", "retrying")
# ask_human waits this long by default, and at most this long.
ASK_DEFAULT_SECONDS = 300
ASK_MAX_SECONDS = 3600

REPORT_PROGRESS = AgentTool(
    name="report_progress",
    title="Report progress",
    description=(
        "Replace this call's progress line, which the caller sees in the call's status "
        "(e.g. 'read 3 of 10 files'). Progress never completes the call."
    ),
    input_schema=obj(
        {"text": text("The new progress line.", limits.MAX_PROGRESS_BYTES)}, ("text",)
    ),
    output_schema=OK,
    read_only=False,
    destructive=False,
    idempotent=True,
)

POST_MESSAGE = AgentTool(
    name="post_message",
    title="Post an execution message",
    description=(
        "Add a message to this call's execution messages, which the caller pages "
        "through in the call's status. It does not end the call; the execution's final "
        "answer is your last message when you stop."
    ),
    input_schema=obj(
        {
            "text": text("The message.", limits.MAX_EXECUTION_MESSAGE_BYTES),
            "role": enum("Who speaks; null for 'assistant'.", MESSAGE_ROLES),
        },
        ("text",),
    ),
    output_schema=OK,
    read_only=False,
    destructive=False,
    idempotent=False,
)

RECORD_EVENT = AgentTool(
    name="record_event",
    title="Record a conversation event",
    description=(
        "Record an event in this call's conversation events (e.g. kind 'note' or "
        "'decision' with a short text). Events of kind tool_call and tool_result keep "
        "the tool_name only: never put raw tool arguments or results in an event."
    ),
    input_schema=obj(
        {
            "kind": enum(
                "What the event is: a note, a decision, the assistant's text, a tool_call "
                "or tool_result (with tool_name), a warning or an error.",
                EVENT_KINDS,
            ),
            "text": text("What happened.", limits.MAX_EVENT_TEXT_BYTES, min_length=0),
            "tool_name": {
                "type": "string",
                "description": "For tool_call and tool_result events: the tool's name.",
                "maxLength": 200,
            },
        },
        ("kind",),
    ),
    output_schema=OK,
    read_only=False,
    destructive=False,
    idempotent=False,
)

RECORD_STEP = AgentTool(
    name="record_step",
    title="Record a workflow step",
    description=(
        "Workflow function executions only: add an entry to the run's step history "
        "(the step, its status: started, completed, failed, skipped or retrying, an "
        "optional group and "
        "detail). The caller reads the history in the call's status."
    ),
    input_schema=obj(
        {
            "step": text("The step's name.", limits.MAX_STEP_NAME_BYTES),
            "status": enum("The step's status.", STEP_STATUSES),
            "group": text("The group within the step.", limits.MAX_STEP_NAME_BYTES, min_length=0),
            "detail": text("A short detail.", limits.MAX_STEP_DETAIL_BYTES, min_length=0),
        },
        ("step", "status"),
    ),
    output_schema=OK,
    read_only=False,
    destructive=False,
    idempotent=False,
)

ASK_HUMAN = AgentTool(
    name="ask_human",
    title="Ask a human",
    description=(
        "Ask the caller or the target's owner a question and wait for the answer. The "
        "call shows waiting_for_input with your question meanwhile. After "
        f"timeout_seconds (default {ASK_DEFAULT_SECONDS}) without an answer the question "
        "is withdrawn and this returns answered=false: go on without it, or ask again. "
        "With choices, the human picks one of them and the reply is that choice, as written."
    ),
    input_schema=obj(
        {
            "question": text("The question, complete on its own.", limits.MAX_QUESTION_BYTES),
            "timeout_seconds": integer("How long to wait for the answer.", 1, ASK_MAX_SECONDS),
            "choices": {
                "type": "array",
                "description": "The answers to offer, no two the same; the reply is then "
                "exactly one of them. Null: any text answers.",
                "items": text("One answer to offer.", limits.MAX_CHOICE_CHARS),
                "maxItems": limits.MAX_CHOICES,
            },
        },
        ("question",),
    ),
    output_schema={
        "type": "object",
        "properties": {
            "answered": {
                "type": "boolean",
                "description": "true: a human answered (reply); false: the question timed "
                "out and was withdrawn (note).",
            },
            "reply": {"type": "string", "description": "The human's answer, when answered."},
            "note": {
                "type": "string",
                "description": "When not answered: how long it waited, and that the "
                "question was withdrawn.",
            },
        },
        "required": ["answered"],
    },
    read_only=False,
    destructive=False,
    idempotent=False,
)


def execution_toolbox(ctx: ExecutionContext) -> Toolbox:
    """The tools of one execution, acting through its ExecutionContext (L1)."""

    async def report_progress(args: dict[str, Any]) -> dict[str, Any]:
        await ctx.progress(args["text"])
        return {"ok": True}

    async def post_message(args: dict[str, Any]) -> dict[str, Any]:
        await ctx.message(args["text"], role=args.get("role", "assistant"))
        return {"ok": True}

    async def record_event(args: dict[str, Any]) -> dict[str, Any]:
        await ctx.event(args["kind"], args.get("text", ""), tool_name=args.get("tool_name", ""))
        return {"ok": True}

    async def record_step(args: dict[str, Any]) -> dict[str, Any]:
        await ctx.step(
            args["step"],
            args["status"],
            group=args.get("group", ""),
            detail=args.get("detail", ""),
        )
        return {"ok": True}

    async def ask_human(args: dict[str, Any]) -> dict[str, Any]:
        timeout = args.get("timeout_seconds", ASK_DEFAULT_SECONDS)
        try:
            reply = await progress.waiting(  # progress over MCP when asked (N3)
                ctx.ask(args["question"], timeout=timeout, choices=args.get("choices") or ()),
                "waiting for a human's answer",
                bound=timeout,
            )
        except TimeoutError:
            return {
                "answered": False,
                "note": f"no answer within {timeout} s; the question was withdrawn",
            }
        return {"answered": True, "reply": reply}

    return Toolbox(
        [
            (REPORT_PROGRESS, report_progress),
            (POST_MESSAGE, post_message),
            (RECORD_EVENT, record_event),
            (RECORD_STEP, record_step),
            (ASK_HUMAN, ask_human),
            *function_tools(ctx, execution=True),
        ]
    )
