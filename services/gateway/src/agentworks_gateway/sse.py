"""Server-sent events (N1, N4): the wire format, and the ASGI response that holds a
stream open.

One event is `event: <name>`, `id: <resume point>` and one `data:` line of JSON (or of an
HTML fragment, for the console), then a blank line; a heartbeat is a comment line
(`: heartbeat <time>`), which keeps the connection and its proxies awake without
changing the browser's last event id. `retry:` at the start tells an `EventSource` to
reconnect after a second.

`EventStream` is the response: it holds a place in the gateway's wait pool and the
principal's share of it (`Admission.stream`, taken before the response is made, so a
refusal is still an HTTP error) and gives it back when the stream ends, whether the
source ended, the client went away (noticed at once, not at the next write) or the
gateway drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog
from starlette.types import Receive, Scope, Send

from agentworks.core import errors
from agentworks_gateway.stream_auth import Held

log = structlog.get_logger("agentworks.gateway")

T = TypeVar("T")

# An EventSource reconnects this long after a dropped stream (milliseconds).
RETRY_MS = 1000

HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),  # a proxy in front must not hold events back
]


def event(name: str, data: Any, *, id: str | None = None) -> bytes:
    """One event: `data` as one line of JSON, or as it is when it is a string (HTML)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines = [f"event: {name}"]
    if id is not None:
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def heartbeat() -> bytes:
    """A comment line: the stream is alive, nothing happened."""
    return f": heartbeat {datetime.now(UTC).isoformat(timespec='seconds')}\n\n".encode()


def retry(ms: int = RETRY_MS) -> bytes:
    """How long an EventSource waits before it reconnects."""
    return f"retry: {ms}\n\n".encode()


def error_event(exc: errors.AgentWorksError) -> bytes:
    """A refusal after the stream started: `event: error` with the error object (the
    JSON of an API refusal's `error`); the stream then ends."""
    return event("error", errors.as_object(exc))


async def guarded(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """`events`, ending with an error event instead of an exception."""
    try:
        async for chunk in events:
            yield chunk
    except errors.AgentWorksError as exc:
        log.info("stream.refused", code=exc.code.name, reason=exc.reason, message=exc.message)
        yield error_event(exc)
    except Exception:
        log.exception("stream.internal_error")
        yield error_event(errors.Internal("internal error: see the gateway's log"))


async def until(stop: asyncio.Event, source: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of `source` until it ends or `stop` is set (the gateway drains: the
    client reconnects to another replica from its last event id)."""
    stopped = asyncio.ensure_future(stop.wait())
    item: asyncio.Future[T] | None = None
    try:
        while not stop.is_set():
            item = asyncio.ensure_future(anext(source))  # type: ignore[arg-type]
            await asyncio.wait({item, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not item.done():
                return
            try:
                yield item.result()
            except StopAsyncIteration:
                return
            item = None
    finally:
        stopped.cancel()
        # Ended from outside too (the client went away: this generator is cancelled or
        # closed while it waits): the pending read is cancelled, so the source's stream
        # ends now, not at its next event or heartbeat (it held a wait until then).
        if item is not None and not item.done():
            item.cancel()
            with contextlib.suppress(BaseException):
                await item
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


class EventStream:
    """An ASGI response streaming `events`; `release()` runs once when it ends. With
    `held` (its token's hold, `stream_auth`), a token found revoked or expired ends the
    stream with `event: error` saying so (A1)."""

    def __init__(
        self,
        events: AsyncIterator[bytes],
        release: Callable[[], None],
        held: Held | None = None,
    ) -> None:
        self.events = events
        self.release = release
        self.held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            body = asyncio.ensure_future(self._body(send))
            gone = asyncio.ensure_future(_disconnected(receive))
            ended = asyncio.ensure_future(
                self.held.ended.wait() if self.held else asyncio.Event().wait()
            )
            left = False
            try:
                await asyncio.wait({body, gone, ended}, return_when=asyncio.FIRST_COMPLETED)
                left = gone.done()
            finally:
                for task in (body, gone, ended):
                    task.cancel()
                await asyncio.gather(body, gone, ended, return_exceptions=True)
            if self.held and self.held.ended.is_set() and not left:
                await self._refuse(send, self.held)
        finally:
            self.release()

    async def _refuse(self, send: Send, held: Held) -> None:
        refusal = held.refusal or errors.Unauthenticated("the stream's token no longer lets in")
        log.info("stream.ended", reason=refusal.reason, token_id=held.token_id)
        with contextlib.suppress(OSError):
            await send(
                {"type": "http.response.body", "body": error_event(refusal), "more_body": True}
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _body(self, send: Send) -> None:
        try:
            async for chunk in self.events:
                if self.held is not None and chunk.startswith(b"event: "):
                    await self.held.verify()  # raises once the token no longer lets in
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went away while we wrote
        except errors.AgentWorksError:
            return  # the token ended: __call__ sends the refusal
        finally:
            aclose = getattr(self.events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
