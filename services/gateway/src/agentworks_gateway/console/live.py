"""The console's live pages by push (N4): server-sent events of server-rendered HTML, read
by `static/live.js` (an `EventSource`; no timed poll in the browser).

- `GET /console/conversations/{id}/stream?from=<cursor>`: the transcript's entries from
  `from` on as `swap` events, each `<li>` with its entry's id: the script replaces an
  entry it shows (a delivery's status changed: `in_turn` became `handled`) and appends a
  new one. The stream re-reads the transcript from the first delivery that was not yet
  final (`from` moves on once all before it are) when woken: by a message arriving in
  the inbox (`MessagingClient.subscribe`, for the inbox's own principal), by a message
  sent from this replica's console, and, while a delivery shown is `pending` or
  `in_turn`, after 1 s, then 2, 4 and 8 s (a delivery's status has no stream of its own;
  the target's owner or an operator, who cannot subscribe to another's inbox, is woken
  the same way, up to every 10 s). With every delivery final and no message, it reads
  nothing.
- `GET /console/calls/{id}/stream`: the call's panel at each change
  (`FunctionsClient.watch_call`), redrawn from the whole status; `end` after the
  terminal one.

Each stream holds one of the gateway's waits and one of the principal's, as the API's
streams do (B6, B7), and ends when the session does, or the gateway drains (the browser
reconnects by itself, to another replica).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import structlog
from starlette.requests import Request
from starlette.routing import Route

from agentworks.core import errors
from agentworks_gateway import sse
from agentworks_gateway.console.calls import OPEN, status_of
from agentworks_gateway.console.web import PREFIX, Console
from agentworks_gateway.sessions import Session
from agentworks_gateway.stream_auth import Held

log = structlog.get_logger("agentworks.gateway.console")

TRANSCRIPT_PAGE = 200
UNFINISHED = frozenset({"pending", "in_turn"})
# Re-reads while a delivery shown is not final: the first pause, and the longest.
RECHECK_SECONDS = (1.0, 8.0)
# Without an inbox to subscribe to (another's conversation): the longest pause.
UNSUBSCRIBED_MAX_SECONDS = 10.0
HEARTBEAT_SECONDS = 15.0
END_STATUSES = frozenset({"completed", "failed", "interrupted", "cancelled"})

# Streams of each conversation open on this replica: a message sent from its console
# wakes them at once.
_WAKES: dict[str, set[asyncio.Event]] = {}


def wake(conversation_id: str) -> None:
    """Wake this replica's streams of a conversation (a message was just sent to it)."""
    for event in _WAKES.get(conversation_id, ()):
        event.set()


def entry_key(entry: dict[str, Any]) -> str:
    """The id of an entry's `<li>` (templates/_entry.html)."""
    if entry.get("type") == "message":
        return f"entry-m-{entry['message_id']}"
    return f"entry-d-{entry['delivery_id']}"


async def read_from(
    console: Console, session: Session, conversation_id: str, cursor: str
) -> tuple[list[tuple[str, dict[str, Any]]], str, dict[str, Any]]:
    """The transcript after `cursor` to its end: each entry with the cursor its page was
    read from (where to read it again), the end cursor, and the last page (its target,
    inbox)."""
    entries: list[tuple[str, dict[str, Any]]] = []
    while True:
        args: dict[str, Any] = {"conversation_id": conversation_id, "limit": TRANSCRIPT_PAGE}
        if cursor:
            args["cursor"] = cursor
        page = await console.tool(session, "transcript", args)
        entries.extend((cursor, entry) for entry in page["items"])
        cursor = page.get("next_cursor") or cursor
        if len(page["items"]) < TRANSCRIPT_PAGE:
            return entries, cursor, page


def recheck_cursor(entries: list[tuple[str, dict[str, Any]]], end: str) -> str:
    """Where to read again: the page of the first delivery not yet final, else the end."""
    for cursor, entry in entries:
        if entry.get("type") == "delivery" and entry.get("status") in UNFINISHED:
            return cursor
    return end


def _render(console: Console, request: Request, template: str, **context: Any) -> str:
    html: str = console.templates.get_template(template).render(
        request=request, path=request.url.path, **context
    )
    return html


def _hold(console: Console, session: Session) -> tuple[contextlib.ExitStack, Held]:
    """The stream's place in the wait pool (B6, B7) and its token's hold (A1: a revoked
    or expired token ends the stream), until the stack is closed."""
    held = contextlib.ExitStack()
    held.enter_context(console.gateway.admission.stream(session.identity.principal))
    return held, held.enter_context(console.gateway.open_tokens.hold(session.token_id))


def _session_left(session: Session) -> float:
    return max(0.0, (session.expires_at - datetime.now(UTC)).total_seconds())


async def transcript_stream(console: Console, request: Request, session: Session) -> Any:
    """`GET .../conversations/{id}/stream` (see the module's text)."""
    conversation_id = request.path_params["conversation_id"]
    start = request.query_params.get("from", "")
    entries, end, page = await read_from(console, session, conversation_id, start)  # A3 here
    held, token = _hold(console, session)
    subscribe = page.get("inbox_id", "")

    async def events() -> AsyncIterator[bytes]:
        yield sse.retry()
        woken = asyncio.Event()
        _WAKES.setdefault(conversation_id, set()).add(woken)
        listener = asyncio.ensure_future(_listen(console, session, subscribe, end, woken))
        stop = console.gateway.draining
        deadline = asyncio.get_running_loop().time() + _session_left(session)
        sent: dict[str, str] = {}
        current, tail, pause = entries, end, RECHECK_SECONDS[0]
        loop = asyncio.get_running_loop()
        beat_at = loop.time() + HEARTBEAT_SECONDS
        try:
            while True:
                fresh: dict[str, str] = {}
                changed = []
                for _, entry in current:
                    key = entry_key(entry)
                    html = _render(console, request, "_entry.html", e=entry)
                    fresh[key] = html
                    if sent.get(key) != html:
                        changed.append(html)
                sent = fresh
                if changed:
                    yield sse.event("swap", "".join(changed))
                    beat_at = loop.time() + HEARTBEAT_SECONDS
                    pause = RECHECK_SECONDS[0]
                cursor = recheck_cursor(current, tail)
                timer: float | None = None
                if cursor != tail:  # a delivery shown is not final yet
                    timer, pause = pause, min(pause * 2, RECHECK_SECONDS[1])
                elif listener.done():  # no inbox of ours to be woken by
                    timer, pause = pause, min(pause * 2, UNSUBSCRIBED_MAX_SECONDS)
                timer_at = None if timer is None else loop.time() + timer
                while True:
                    due = min(deadline, beat_at, timer_at if timer_at is not None else deadline)
                    if not await _woken(woken, stop, due - loop.time()):
                        if stop.is_set() or loop.time() >= deadline:
                            return
                        if loop.time() >= beat_at:
                            yield sse.heartbeat()
                            beat_at = loop.time() + HEARTBEAT_SECONDS
                        if timer_at is None or loop.time() < timer_at:
                            continue
                    break
                woken.clear()
                current, tail, _ = await read_from(console, session, conversation_id, cursor)
        finally:
            listener.cancel()
            _WAKES.get(conversation_id, set()).discard(woken)
            if not _WAKES.get(conversation_id):
                _WAKES.pop(conversation_id, None)

    return sse.EventStream(sse.guarded(events()), held.close, token)


async def _woken(woken: asyncio.Event, stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `woken`; False when they passed (or `stop` was set)."""
    if woken.is_set():
        return True
    waits = {asyncio.ensure_future(woken.wait()), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waits, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
    return woken.is_set() and not stop.is_set()


async def _listen(
    console: Console, session: Session, inbox_id: str, after: str, woken: asyncio.Event
) -> None:
    """Set `woken` at each message that reaches the inbox (N1); returns when the viewer
    may not subscribe to it (not the inbox's principal: A3)."""
    if not inbox_id:
        return
    client = console.gateway.messaging(session.identity)
    try:
        async for _ in client.subscribe(inbox_id, after=after):
            woken.set()
    except errors.InvalidArgument:
        # The transcript's cursor is a position in the conversation, as the inbox's
        # are; were it refused, every message wakes once, then each new one.
        async for _ in client.subscribe(inbox_id):
            woken.set()
    except errors.AgentWorksError as exc:
        log.info("console.live.unsubscribed", inbox_id=inbox_id, code=exc.code.name)


async def call_stream(console: Console, request: Request, session: Session) -> Any:
    """`GET .../calls/{id}/stream` (see the module's text)."""
    call_id = request.path_params["call_id"]
    source = console.gateway.functions(session.identity).watch_call(
        call_id, heartbeat_seconds=int(HEARTBEAT_SECONDS), heartbeats=True
    )
    first = await anext(source)  # the status now, or the refusal (A3: as the page's)
    held, token = _hold(console, session)

    async def changes() -> AsyncIterator[Any]:
        yield first
        async for change in source:
            yield change

    async def events() -> AsyncIterator[bytes]:
        yield sse.retry()
        async for change in sse.until(console.gateway.draining, changes()):
            if change.WhichOneof("change") != "status":
                yield sse.heartbeat()
                continue
            status = await status_of(console, session, call_id)
            html = _render(
                console, request, "_call_panel.html", call=status, open=OPEN, session=session
            )
            yield sse.event("swap", html)
            if status["status"] in END_STATUSES:
                yield sse.event("end", call_id)
                return

    return sse.EventStream(sse.guarded(events()), held.close, token)


def routes(page: Any) -> list[Route]:
    return [
        Route(
            f"{PREFIX}/conversations/{{conversation_id}}/stream",
            page(transcript_stream),
            methods=["GET"],
        ),
        Route(f"{PREFIX}/calls/{{call_id}}/stream", page(call_stream), methods=["GET"]),
    ]
