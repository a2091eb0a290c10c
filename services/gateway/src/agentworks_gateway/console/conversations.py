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

import urllib.parse
import uuid
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


async def _found_by_id(console: Console, session: Session, value: str) -> str:
    """The page of the conversation, inbox or call with this id that the session may
    see, or "" (A3: one it may not see is not found, as any other)."""
    for tool, args in (
        ("transcript", {"conversation_id": value, "limit": 1}),
        ("transcript", {"inbox_id": value, "limit": 1}),
        ("functions", {"action": "status", "call_id": value, "message_limit": 1}),
    ):
        try:
            found = await console.tool(session, tool, args)
        except (errors.NotFound, errors.InvalidArgument):
            continue
        if tool == "functions":
            return f"{PREFIX}/calls/{found['call_id']}"
        return f"{PREFIX}/conversations/{found['conversation_id']}"
    return ""


def _page_size(value: str) -> int:
    """`?limit=`: how many conversations a page shows, 1 to PAGE (PAGE by default)."""
    return min(PAGE, max(1, int(value))) if value.isdigit() else PAGE


def _as_target(value: str) -> str:
    """A search word as a target filter: crew:<name>, workflow:<id>, or a crew's name."""
    kind, sep, _ = value.partition(":")
    return value if sep and kind in ("crew", "workflow") else f"crew:{value}"


async def conversations_page(console: Console, request: Request, session: Session) -> Response:
    """The list (V7): a search by id (conversation, inbox or call: opens it) or by
    target, a target filter, and the list's own pages (its cursors)."""
    query = request.query_params
    search = query.get("q", "").strip()
    target = query.get("target", "").strip()
    missing = ""
    if search:
        try:
            uuid.UUID(search)
        except ValueError:
            target = _as_target(search)
        else:
            if found := await _found_by_id(console, session, search):
                return redirect(found)
            missing = search
    args: dict[str, Any] = {"what": "conversations", "limit": _page_size(query.get("limit", ""))}
    if query.get("cursor"):
        args["cursor"] = query["cursor"]
    if target:
        args["target"] = target
    page = {"items": []} if missing else await console.tool(session, "list", args)
    targets = await console.tool(session, "list", {"what": "targets", "limit": 200})
    return console.render(
        request,
        "conversations.html",
        session,
        conversations=page["items"],
        next_cursor=page.get("next_cursor", ""),
        first_page=bool(query.get("cursor")),
        filter_query=urllib.parse.urlencode(
            {k: v for k, v in (("target", target), ("limit", query.get("limit", ""))) if v}
        ),
        targets=targets["items"],
        filter_target=target,
        search=search,
        missing=missing,
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


def _calls_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls made from the conversation that have ended: each one's completion
    notice (a `function_completed` delivery, F13) names it. An open call is not linked
    yet: a call's status does not name the conversation it notifies."""
    calls = []
    for entry in entries:
        attributes = entry.get("attributes") or {}
        if entry.get("kind") == "function_completed" and attributes.get("call_id"):
            calls.append({**attributes, "created_at": entry.get("created_at")})
    return calls


async def _timers_of(
    console: Console, session: Session, conversation_id: str
) -> dict[str, list[dict[str, Any]]]:
    """The conversation's schedules and pending wake-ups the session may see."""
    found: dict[str, list[dict[str, Any]]] = {}
    for what in ("schedules", "wake_ups"):
        args = {"what": what, "conversation_id": conversation_id, "limit": 100}
        found[what] = (await console.tool(session, "list", args))["items"]
    return found


async def conversation_page(console: Console, request: Request, session: Session) -> Response:
    conversation_id = request.path_params["conversation_id"]
    read, end, page = await live.read_from(console, session, conversation_id, "")
    entries = [entry for _, entry in read]
    # Only the principal the inbox is bound to may write in it (C3); others read.
    can_reply = _starter(entries) == session.identity.principal
    timers = await _timers_of(console, session, conversation_id)
    return console.render(
        request,
        "conversation.html",
        session,
        conversation_id=conversation_id,
        transcript=page,
        entries=entries[-MAX_ENTRIES:],
        live_from=live.recheck_cursor(read, end),
        can_reply=can_reply,
        calls=_calls_of(entries),
        schedules=timers["schedules"],
        wake_ups=timers["wake_ups"],
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
