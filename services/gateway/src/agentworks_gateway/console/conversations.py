"""Conversations in the console (V2, V4, V5): the list, a whole transcript that updates
live, and the chat: new conversations and replies on the app channel (the owner's
chat passes the messaging switch, C8).

The transcript comes from the `transcript` tool, the list from `list`, and a chat
message goes through `messages send`'s arguments check and handler with the app
channel (`tools.messages.app_chat`). The open transcript is updated by push (`live`,
N4): new entries appear and entries shown change in place; a message sent from the page
wakes its stream at once.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks.core import errors
from agentworks_gateway.console import live
from agentworks_gateway.console.web import PREFIX, Console, form_of, redirect
from agentworks_gateway.sessions import Session
from agentworks_gateway.tools import check_arguments, find_tool
from agentworks_gateway.tools.messages import app_chat

PAGE = 50
# A transcript page shows at most this many entries at first (the newest ones).
MAX_ENTRIES = 2000


def _destination(value: str) -> dict[str, str]:
    """The `messages send` destination of a target field: crew:<name>, workflow:<id>,
    or a bare name for a crew."""
    kind, sep, name = value.strip().partition(":")
    if not sep:
        return {"crew": kind}
    if kind == "crew":
        return {"crew": name}
    if kind == "workflow":
        return {"workflow": name}
    raise errors.InvalidArgument(
        f"target {value!r} is not a crew or workflow: write crew:<name> or workflow:<id>",
        reason=errors.Reason.FIELD_RULE,
        metadata=errors.rule_meta("target", "pattern"),
    )


async def _send(console: Console, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    checked = check_arguments(find_tool("messages", mcp=False), {"action": "send", **args})
    return await app_chat(console.gateway, session.identity, checked)


async def conversations_page(console: Console, request: Request, session: Session) -> Response:
    args: dict[str, Any] = {"what": "conversations", "limit": PAGE}
    if request.query_params.get("cursor"):
        args["cursor"] = request.query_params["cursor"]
    if request.query_params.get("target"):
        args["target"] = request.query_params["target"]
    page = await console.tool(session, "list", args)
    targets = await console.tool(session, "list", {"what": "targets", "limit": 200})
    return console.render(
        request,
        "conversations.html",
        session,
        conversations=page["items"],
        next_cursor=page.get("next_cursor", ""),
        targets=targets["items"],
        filter_target=request.query_params.get("target", ""),
    )


async def new_chat(console: Console, request: Request, session: Session) -> Response:
    form = form_of(request)
    receipt = await _send(
        console,
        session,
        {**_destination(form.get("target", "")), "message": form.get("message", "")},
    )
    return redirect(f"{PREFIX}/conversations/{receipt['conversation_id']}")


def _starter(entries: list[dict[str, Any]]) -> str:
    """Who started the conversation: the sender of its first message to the target."""
    for entry in entries:
        if entry.get("type") == "message" and entry.get("direction") == "to_target":
            return str(entry.get("sender", ""))
    return ""


async def conversation_page(console: Console, request: Request, session: Session) -> Response:
    conversation_id = request.path_params["conversation_id"]
    read, end, page = await live.read_from(console, session, conversation_id, "")
    entries = [entry for _, entry in read]
    # Only the principal the inbox is bound to may write in it (C3); others read.
    can_reply = _starter(entries) == session.identity.principal
    return console.render(
        request,
        "conversation.html",
        session,
        conversation_id=conversation_id,
        transcript=page,
        entries=entries[-MAX_ENTRIES:],
        live_from=live.recheck_cursor(read, end),
        can_reply=can_reply,
    )


async def conversation_send(console: Console, request: Request, session: Session) -> Response:
    conversation_id = request.path_params["conversation_id"]
    form = form_of(request)
    await _send(
        console, session, {"inbox_id": form.get("inbox_id", ""), "message": form.get("message", "")}
    )
    live.wake(conversation_id)  # this replica's streams of it read the transcript now
    if not request.headers.get("hx-request"):
        return redirect(f"{PREFIX}/conversations/{conversation_id}")
    # A fresh form in place of the sent one.
    return console.render(
        request,
        "_send_form.html",
        session,
        conversation_id=conversation_id,
        inbox_id=form.get("inbox_id", ""),
    )


def routes(page: Any, action: Any) -> list[Route]:
    base = f"{PREFIX}/conversations"
    return [
        Route(base, page(conversations_page), methods=["GET"]),
        Route(f"{PREFIX}/chat", action(new_chat), methods=["POST"]),
        Route(base + "/{conversation_id}", page(conversation_page), methods=["GET"]),
        Route(base + "/{conversation_id}/send", action(conversation_send), methods=["POST"]),
    ]
