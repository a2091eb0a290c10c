"""The tools of a turn (L1, C6, S1, C12, L9): reply, start and continue a conversation
with another target, wake-ups, the function tools, the transcript."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentworks.agents.agent_tools import views
from agentworks.agents.agent_tools.a2a_tools import a2a_tools
from agentworks.agents.agent_tools.function_tools import function_tools
from agentworks.agents.agent_tools.schemas import (
    AFTER_SECONDS,
    AT,
    SEND_RECEIPT,
    TARGET,
    WAKE_UP,
    WAKE_UP_ID,
    described,
    identifier,
    integer,
    obj,
    text,
)
from agentworks.agents.agent_tools.toolbox import AgentTool, Toolbox, ToolError, unavailable
from agentworks.core import limits

if TYPE_CHECKING:
    from agentworks.runtime.turn_context import TurnContext

MESSAGE_TEXT = text("The message text.", limits.MAX_TEXT_BYTES)

SEND_MESSAGE = AgentTool(
    name="send_message",
    title="Send a message",
    description=(
        "Send a message to the other side of this conversation (its trusted reply "
        "address). This is the only way anything you say reaches them: your final chat "
        "text is never forwarded. Send as many messages as you need (an acknowledgement, "
        "a question, updates, a result later), or none. The answer is a delivery "
        "receipt, not a reply."
    ),
    input_schema=obj({"text": MESSAGE_TEXT}, ("text",)),
    output_schema=SEND_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
)

START_CONVERSATION = AgentTool(
    name="start_conversation",
    title="Start a conversation with another target",
    description=(
        "Send a first message to another crew or workflow, starting a new conversation "
        "with it. Its replies come back as later turns of this conversation; nothing "
        "waits for them and silence is a valid answer. Keep the receipt's inbox_id: "
        "continue_conversation answers them with it. Returns a delivery receipt."
    ),
    input_schema=obj({"target": TARGET, "text": MESSAGE_TEXT}, ("target", "text")),
    output_schema=SEND_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
)

CONTINUE_CONVERSATION = AgentTool(
    name="continue_conversation",
    title="Continue a conversation with another target",
    description=(
        "Send another message into a conversation this conversation started with "
        "another crew or workflow, by its inbox_id (from start_conversation's receipt, or "
        "the attributes of a conversation_reply delivery). Their replies come back as "
        "later conversation_reply turns of this conversation. Only conversations this "
        "one started can be continued (any other inbox is NOT_FOUND), and not while the "
        "other target has agent messaging off. To answer the other side of THIS "
        "conversation, use send_message. Returns a delivery receipt."
    ),
    input_schema=obj(
        {
            "inbox_id": identifier(
                "The other conversation's inbox_id, from start_conversation's receipt "
                "or a conversation_reply delivery."
            ),
            "text": MESSAGE_TEXT,
        },
        ("inbox_id", "text"),
    ),
    output_schema=SEND_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
)

REQUEST_WAKE_UP = AgentTool(
    name="request_wake_up",
    title="Request a wake-up",
    description=(
        "Ask to be woken later in this conversation: give after_seconds or at (exactly "
        "one) and a note to yourself. When due, a wake_up delivery with the note starts "
        "a new turn; it does not resend any question. Messages received meanwhile do not "
        "cancel it: cancel_wake_up or reschedule_wake_up do."
    ),
    input_schema=obj(
        {
            "after_seconds": AFTER_SECONDS,
            "at": AT,
            "note": text(
                "What to check when woken (delivered back to you).",
                limits.MAX_NOTE_BYTES,
                min_length=0,
            ),
        }
    ),
    output_schema=WAKE_UP,
    read_only=False,
    destructive=False,
    idempotent=False,
)

LIST_WAKE_UPS = AgentTool(
    name="list_wake_ups",
    title="List wake-ups",
    description=(
        "List this conversation's wake-ups: pending ones, and with include_finished also "
        "fired and cancelled ones. Page with after=next_cursor."
    ),
    input_schema=obj(
        {
            "include_finished": {
                "type": "boolean",
                "description": "Also list fired, cancelled and failed wake-ups.",
            },
            "after": {"type": "string", "description": "next_cursor of the previous page."},
            "limit": integer("At most this many (1-200).", 1, limits.MAX_LIST_PAGE),
        }
    ),
    output_schema={
        "type": "object",
        "properties": {
            "wake_ups": {"type": "array", "items": WAKE_UP, "description": "One page."},
            "next_cursor": described("next_cursor", {"type": "string"}),
        },
        "required": ["wake_ups", "next_cursor"],
    },
    read_only=True,
    destructive=False,
    idempotent=True,
)

CANCEL_WAKE_UP = AgentTool(
    name="cancel_wake_up",
    title="Cancel a wake-up",
    description="Cancel a pending wake-up of this conversation, so it never fires.",
    input_schema=obj({"wake_up_id": WAKE_UP_ID}, ("wake_up_id",)),
    output_schema=WAKE_UP,
    read_only=False,
    destructive=True,
    idempotent=False,
)

RESCHEDULE_WAKE_UP = AgentTool(
    name="reschedule_wake_up",
    title="Reschedule a wake-up",
    description=(
        "Move a pending wake-up of this conversation to a new time: give after_seconds "
        "or at (exactly one). Its note stays."
    ),
    input_schema=obj(
        {"wake_up_id": WAKE_UP_ID, "after_seconds": AFTER_SECONDS, "at": AT}, ("wake_up_id",)
    ),
    output_schema=WAKE_UP,
    read_only=False,
    destructive=False,
    idempotent=False,
)

READ_TRANSCRIPT = AgentTool(
    name="read_transcript",
    title="Read this conversation's transcript",
    description=(
        "Read this conversation's history, oldest first: the messages both sides sent "
        "and the deliveries that came in (messages, wake-ups, schedules, webhooks, "
        "function completions) with their status. A delivery marked interrupted was "
        "started by a turn that was lost and is not resent: decide yourself whether to "
        "act on it again. Page with after=next_cursor."
    ),
    input_schema=obj(
        {
            "after": {"type": "string", "description": "next_cursor of the previous page."},
            "limit": integer("At most this many entries (1-200).", 1, 200),
        }
    ),
    output_schema={
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "items": {"type": "object"},
                "description": "One page, oldest first: each a message or a delivery (its "
                "kind, status, text, attributes and, for a message it carries, message).",
            },
            "next_cursor": described("next_cursor", {"type": "string"}),
        },
        "required": ["entries", "next_cursor"],
    },
    read_only=True,
    destructive=False,
    idempotent=True,
)


def when(args: dict[str, Any], tool: str) -> dict[str, Any]:
    """`{"after_seconds": n}` or `{"at": datetime}` from the arguments, exactly one."""
    after, at = args.get("after_seconds"), args.get("at")
    if (after is None) == (at is None):
        raise ToolError(
            f"invalid arguments for {tool}: give exactly one of after_seconds or at"
            + (" (both were given)" if after is not None else "")
        )
    if after is not None:
        return {"after_seconds": after}
    try:
        parsed = datetime.fromisoformat(str(at))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ToolError(
            f"invalid arguments for {tool}: at {at!r} is not an RFC 3339 time with an "
            "offset, e.g. '2026-12-02T09:00:00Z'"
        )
    return {"at": parsed}


def turn_toolbox(ctx: TurnContext) -> Toolbox:
    """The tools of one turn, acting through its TurnContext (L1)."""

    async def send_message(args: dict[str, Any]) -> dict[str, Any]:
        return views.send_receipt(await ctx.send_message(args["text"]))

    async def start_conversation(args: dict[str, Any]) -> dict[str, Any]:
        start = getattr(ctx, "start_conversation", None)
        if start is None:
            raise unavailable("start_conversation", "TurnContext.start_conversation")
        return views.send_receipt(await start(args["target"], args["text"]))

    async def continue_conversation(args: dict[str, Any]) -> dict[str, Any]:
        go_on = getattr(ctx, "continue_conversation", None)
        if go_on is None:
            raise unavailable("continue_conversation", "TurnContext.continue_conversation")
        return views.send_receipt(await go_on(args["inbox_id"], args["text"]))

    async def request_wake_up(args: dict[str, Any]) -> dict[str, Any]:
        moment = when(args, "request_wake_up")
        return views.wake_up(await ctx.wake_me(note=args.get("note", ""), **moment))

    async def list_wake_ups(args: dict[str, Any]) -> dict[str, Any]:
        page = await ctx.list_wake_ups(
            include_finished=args.get("include_finished", False),
            after=args.get("after", ""),
            limit=args.get("limit", 0),
        )
        return {
            "wake_ups": [views.wake_up(w) for w in page.wake_ups],
            "next_cursor": page.next_cursor,
        }

    async def cancel_wake_up(args: dict[str, Any]) -> dict[str, Any]:
        return views.wake_up(await ctx.cancel_wake_up(args["wake_up_id"]))

    async def reschedule_wake_up(args: dict[str, Any]) -> dict[str, Any]:
        moment = when(args, "reschedule_wake_up")
        return views.wake_up(await ctx.reschedule_wake_up(args["wake_up_id"], **moment))

    async def read_transcript(args: dict[str, Any]) -> dict[str, Any]:
        page = await ctx.transcript(after=args.get("after", ""), limit=args.get("limit", 0))
        return views.transcript(page)

    functions = function_tools(ctx, execution=False)
    return Toolbox(
        [
            (SEND_MESSAGE, send_message),
            (START_CONVERSATION, start_conversation),
            (CONTINUE_CONVERSATION, continue_conversation),
            (REQUEST_WAKE_UP, request_wake_up),
            (LIST_WAKE_UPS, list_wake_ups),
            (CANCEL_WAKE_UP, cancel_wake_up),
            (RESCHEDULE_WAKE_UP, reschedule_wake_up),
            *functions,
            (READ_TRANSCRIPT, read_transcript),
            *a2a_tools(ctx),
        ]
    )
