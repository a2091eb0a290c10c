"""Server streams that resume by themselves (N1): the typed clients' async iterators.

A stream of events that each carry a resume cursor (`InboxEvent.cursor`) is opened
again from the last cursor whenever it breaks: the replica it was on drains
(UNAVAILABLE), is killed (the connection resets), or falls silent for longer than its
heartbeats allow. The server never repeats what is before the cursor, so nothing is
yielded twice and nothing is lost. Attempts back off (0.1 s doubling to 5 s) while the
service cannot be reached; a refusal of the request itself (PERMISSION_DENIED,
NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...) is raised as the unary calls raise
it, and so is a failure before the first event of the first attempt (nothing was ever
streamed: the caller hears what a unary call would have said).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
import structlog

from agentworks.client.rpc import ServiceClient, _answered, _tls_failure
from agentworks.core import errors

log = structlog.get_logger("agentworks.client")

C = TypeVar("C")  # a stream's resume cursor

RESUME_BACKOFF_FIRST_SECONDS = 0.1
RESUME_BACKOFF_MAX_SECONDS = 5.0
# A stream silent this much longer than its heartbeat interval is taken for dead (a
# half-open connection nobody reset) and opened again.
SILENCE_SLACK_SECONDS = 10.0

# Transport failures (no service answered) worth a new attempt: the connection is gone.
_RESUMABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,  # "RST_STREAM", a proxy's reset
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,  # by the other side (ours is CancelledError)
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)


def resumable(exc: grpc.aio.AioRpcError) -> bool:
    """Whether a stream that failed so is opened again from its cursor: a drain (the
    service's UNAVAILABLE) or a broken connection; never a refusal of the request."""
    if _answered(exc):
        return exc.code() == grpc.StatusCode.UNAVAILABLE
    if exc.code() == grpc.StatusCode.UNAVAILABLE and _tls_failure(exc.details() or ""):
        return False
    return exc.code() in _RESUMABLE


def stream_error(client: ServiceClient, method: str, exc: grpc.aio.AioRpcError) -> Exception:
    """A stream's failure as the unary calls raise it (`AgentWorksError`)."""
    details = exc.details() or exc.code().name
    if _answered(exc):
        return errors.from_trailers(exc.code(), details, exc.trailing_metadata())
    service = client._service()
    unreached = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    if exc.code() == grpc.StatusCode.UNAVAILABLE:
        details = f"the {service} service is unavailable ({details}); retry shortly"
    return errors.from_status(
        exc.code(),
        f"{method}: {details}",
        errors.Reason.UNREACHABLE if unreached else "",
        metadata={"service": service} if unreached else None,
    )


async def resuming(
    client: ServiceClient,
    method: str,
    request_for: Callable[[C], Any],
    cursor_of: Callable[[Any], C | None],
    *,
    cursor: C,
    silence_seconds: float,
    ends: Callable[[Any], bool] | None = None,
) -> AsyncIterator[Any]:
    """The events of `client.stub.<method>(request_for(cursor))`, opened again from the
    last event's cursor (`cursor_of`; a falsy one keeps the cursor) whenever the stream
    breaks (see the module). The cursor may be any value: WatchCall's is its three
    positions. A stream that ends on its own (WatchCall, after the terminal status and
    the last pages of messages) names the event after which the server's end of the
    stream is the iterator's end (`ends`); before one, an end is a break like any other.
    """
    backoff = RESUME_BACKOFF_FIRST_SECONDS
    streamed = False  # whether any attempt has received an event
    finished = False  # whether an event said the stream's end is the end (`ends`)
    while True:
        call = getattr(client.stub, method)(request_for(cursor), metadata=client._metadata())
        why = "ended"
        try:
            while True:
                async with asyncio.timeout(silence_seconds):
                    event = await call.read()
                if event is grpc.aio.EOF:
                    if finished:
                        return
                    break  # the server ended it early (a stream that never ends on its own)
                streamed = True
                backoff = RESUME_BACKOFF_FIRST_SECONDS
                cursor = cursor_of(event) or cursor
                finished = finished or (ends is not None and ends(event))
                yield event
        except TimeoutError:
            why = f"silent for {silence_seconds:g} s"
        except grpc.aio.AioRpcError as exc:
            if not (streamed and resumable(exc)):
                raise stream_error(client, method, exc) from None
            why = f"{exc.code().name}: {exc.details()}"
        finally:
            call.cancel()
        log.info("stream.resuming", method=method, why=why, retry_in=backoff)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, RESUME_BACKOFF_MAX_SECONDS)
