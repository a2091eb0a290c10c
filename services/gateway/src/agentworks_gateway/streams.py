"""The HTTP API's event streams (N1, B6, B7, A3): push beside the long-polls, as
server-sent events (`sse`), with the bearer token of `/api/v1/tools`.

- `GET /api/v1/streams/inboxes/{inbox_id}`: the inbox's messages after `?after=` (or the
  `Last-Event-ID` header, which wins), then each new one as it arrives: `event: message`,
  `id:` the cursor after it, `data:` the message as `messages action=read` gives it. It
  never ends on its own; reconnect with the last id and nothing is lost or repeated
  (`MessagingClient.subscribe`, on any replica).
- `GET /api/v1/streams/calls/{call_id}`: the call's status now, then one at each change
  (progress, messages and events after the cursors, the question, files, the state):
  `event: status`, `data:` as `functions action=status` gives it, `id:`
  `<next_after>.<next_after_event>`; after the terminal status `event: end` and the
  stream ends. `?after=` and `?after_event=` (or `Last-Event-ID`) start after those
  message and event indexes (`FunctionsClient.watch_call`).

Both send a comment line (`: heartbeat <time>`) every `?heartbeat_seconds=` (5-60,
default 15) while nothing happens. Access is the tools' (A3): another principal's inbox
or call is 404 NOT_FOUND, as `messages read` and `functions status` answer. A refusal
before the stream is the API's JSON error with its HTTP status; after, an
`event: error` with the error object, and the stream ends.

An open stream holds one of the gateway's waits (`GATEWAY_MAX_WAITS`, 503 past it) and
one of its principal's (429 past it), never a request: idle streams do not use up what
serves requests (B6, B7). When the gateway drains, its streams end and new ones are refused
503 (`DRAINING`); clients reconnect elsewhere from their last id.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks import proto_limits
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks_gateway import metrics, sse
from agentworks_gateway.middleware import error_response, request_context
from agentworks_gateway.service import Gateway, bearer_token
from agentworks_gateway.stream_auth import Held
from agentworks_gateway.tools.function_views import status_dict
from agentworks_gateway.tools.messages import message_dict

log = structlog.get_logger("agentworks.gateway")

STREAMS_PREFIX = "/api/v1/streams"
HEARTBEAT_MIN = proto_limits.MESSAGING_SUBSCRIBE_REQUEST_HEARTBEAT_SECONDS_GTE
HEARTBEAT_MAX = proto_limits.MESSAGING_SUBSCRIBE_REQUEST_HEARTBEAT_SECONDS_LTE
HEARTBEAT_DEFAULT = 15
END_STATUSES = frozenset({"completed", "failed", "interrupted", "cancelled"})


def heartbeat_seconds(request: Request) -> int:
    """`?heartbeat_seconds=`, 5-60 (default 15), else InvalidArgument naming the rule."""
    value = request.query_params.get("heartbeat_seconds", "")
    if not value:
        return HEARTBEAT_DEFAULT
    if not value.isdigit() or not HEARTBEAT_MIN <= int(value) <= HEARTBEAT_MAX:
        raise errors.InvalidArgument(
            f"heartbeat_seconds must be {HEARTBEAT_MIN}-{HEARTBEAT_MAX}, got {value[:20]!r}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("heartbeat_seconds", "int32.gte", HEARTBEAT_MIN),
        )
    return int(value)


def call_cursors(request: Request) -> tuple[int, int]:
    """Where a call's stream starts: `Last-Event-ID` (`<after>.<after_event>`) or
    `?after=` and `?after_event=`; -1 is before the first."""
    last = request.headers.get("last-event-id", "")
    if last:
        after, _, after_event = last.partition(".")
        return _index(after, "Last-Event-ID"), _index(after_event, "Last-Event-ID")
    query = request.query_params
    return (
        _index(query.get("after", "-1"), "after"),
        _index(query.get("after_event", "-1"), "after_event"),
    )


def _index(value: str, field: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -2
    if number < -1:
        raise errors.InvalidArgument(
            f"{field} must be a message or event index (-1 for before the first), "
            f"got {value[:40]!r}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(field, "int64.gte", -1),
        )
    return number


def call_event_id(status: dict[str, Any]) -> str:
    """The id of a status event: where to resume (its message and event cursors)."""
    return f"{status['next_after']}.{status['next_after_event']}"


@dataclass
class Opened:
    """An accepted stream's caller, its token's hold (A1: the stream ends when the token
    does) and what it holds until `close()` (its place in the wait pool, B6, B7)."""

    identity: Identity
    token: Held
    stack: contextlib.ExitStack

    def close(self) -> None:
        self.stack.close()


async def open_stream(gateway: Gateway, request: Request) -> Opened:
    """The caller's identity, its token followed and its place in the wait pool held
    (B6, B7) until the returned `close()`."""
    record = await gateway.token_record(
        bearer_token(request.headers.get("authorization"), "API token")
    )
    identity = gateway.identity_of(record)
    if gateway.draining.is_set():  # its streams just ended: open them on another replica
        raise errors.Unavailable(
            "the gateway is shutting down; reconnect (another replica takes the stream)",
            retry_after=1.0,
            reason=errors.Reason.DRAINING,
        )
    stack = contextlib.ExitStack()
    stack.enter_context(gateway.admission.stream(identity.principal))
    token = stack.enter_context(gateway.open_tokens.hold(record.token_id))
    return Opened(identity, token, stack)


async def inbox_stream(gateway: Gateway, request: Request) -> Response | sse.EventStream:
    """`GET /api/v1/streams/inboxes/{inbox_id}` (see the module's text)."""
    inbox_id = request.path_params["inbox_id"]
    after = request.headers.get("last-event-id") or request.query_params.get("after", "")
    with request_context(request.scope):
        try:
            heartbeat = heartbeat_seconds(request)
            held = await open_stream(gateway, request)
        except errors.AgentWorksError as exc:
            metrics.refused("api", exc)
            return error_response(exc)
        identity = held.identity
        try:
            client = gateway.messaging(identity)
            # The inbox and cursor are checked here (A3: 404 as `messages read`), while
            # the answer can still be an HTTP error; the stream's first event may be
            # a heartbeat away.
            await client.read(inbox_id, after=after, limit=1)
        except errors.AgentWorksError as exc:
            held.close()
            return error_response(exc)
        except BaseException:
            held.close()
            raise
        log.info("stream.opened", stream="inbox", inbox_id=inbox_id, principal=identity.principal)

        async def events() -> AsyncIterator[bytes]:
            yield sse.retry()
            source = client.subscribe(
                inbox_id, after=after, heartbeat_seconds=heartbeat, heartbeats=True
            )
            async for item in sse.until(gateway.draining, source):
                if item.WhichOneof("event") == "message":
                    yield sse.event("message", message_dict(item.message), id=item.cursor)
                else:
                    yield sse.heartbeat()

        return sse.EventStream(sse.guarded(events()), held.close, held.token)


async def call_stream(gateway: Gateway, request: Request) -> Response | sse.EventStream:
    """`GET /api/v1/streams/calls/{call_id}` (see the module's text)."""
    call_id = request.path_params["call_id"]
    with request_context(request.scope):
        try:
            heartbeat = heartbeat_seconds(request)
            after, after_event = call_cursors(request)
            held = await open_stream(gateway, request)
        except errors.AgentWorksError as exc:
            metrics.refused("api", exc)
            return error_response(exc)
        identity = held.identity
        source = gateway.functions(identity).watch_call(
            call_id,
            after=after,
            after_event=after_event,
            heartbeat_seconds=heartbeat,
            heartbeats=True,
        )
        try:
            # The first event is the status now, or the refusal (A3: 404 as `status`).
            first = await anext(source)  # type: ignore[call-overload]
        except errors.AgentWorksError as exc:
            held.close()
            return error_response(exc)
        except BaseException:
            held.close()
            raise
        log.info("stream.opened", stream="call", call_id=call_id, principal=identity.principal)

        async def changes() -> AsyncIterator[Any]:
            yield first
            async for change in source:
                yield change

        async def events() -> AsyncIterator[bytes]:
            yield sse.retry()
            async for change in sse.until(gateway.draining, changes()):
                if change.WhichOneof("change") != "status":
                    yield sse.heartbeat()
                    continue
                status = status_dict(change.status)
                yield sse.event("status", status, id=call_event_id(status))
                if status["status"] in END_STATUSES:
                    yield sse.event("end", {"call_id": call_id, "status": status["status"]})
                    return

        return sse.EventStream(sse.guarded(events()), held.close, held.token)


def stream_routes(gateway: Gateway) -> list[Route]:
    """The HTTP API's event streams."""

    def endpoint(handler: Any) -> Any:
        async def app(request: Request) -> Any:  # a Response, or an EventStream (ASGI)
            return await handler(gateway, request)

        return app

    return [
        Route(f"{STREAMS_PREFIX}/inboxes/{{inbox_id}}", endpoint(inbox_stream), methods=["GET"]),
        Route(f"{STREAMS_PREFIX}/calls/{{call_id}}", endpoint(call_stream), methods=["GET"]),
    ]
