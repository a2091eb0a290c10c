"""The client of the gateway's event streams (`GET /api/v1/streams/...`, N1): server-sent
events read over the CLI's HTTP client, and a loop that reconnects from the last event id.

An answer other than 200 is the API's JSON refusal (ApiError); `event: error` in a stream
is one too. A stream that drops (the gateway restarts or drains, the network breaks) is
opened again from its last event id, after a pause that doubles from 1 s to 10 s and is
reset by every event; refusals other than UNAVAILABLE and DEADLINE_EXCEEDED end it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from agentworks.core.errors import Reason
from agentworks_cli.api import ApiClient, ApiError

STREAMS_PREFIX = "/api/v1/streams"
# The gateway sends a heartbeat this often; a stream silent for twice as long is dropped.
HEARTBEAT_SECONDS = 15
RETRY_SECONDS = (1.0, 10.0)
RETRIED = ("UNAVAILABLE", "DEADLINE_EXCEEDED")


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name, id (the resume point) and JSON data."""

    name: str
    id: str
    data: Any


async def events(api: ApiClient, path: str, *, last_id: str = "") -> AsyncIterator[Event]:
    """The events of one stream (no reconnecting); ApiError for a refusal."""
    headers = {"Accept": "text/event-stream"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    timeout = httpx.Timeout(api.timeout, read=2 * HEARTBEAT_SECONDS + 5)
    params = {"heartbeat_seconds": str(HEARTBEAT_SECONDS)}
    try:
        async with api.http.stream(
            "GET", path, headers=headers, params=params, timeout=timeout
        ) as response:
            if response.status_code != 200:
                await response.aread()
                raise _refusal(api, path, response)
            name, event_id, data = "message", "", list[str]()
            async for line in response.aiter_lines():
                if not line:
                    if data:
                        yield _event(name, event_id, "\n".join(data))
                    name, data = "message", []
                    continue
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    name = value
                elif field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
    except httpx.TimeoutException as exc:
        raise ApiError(
            "DEADLINE_EXCEEDED",
            f"the stream from {api.url} was silent for {2 * HEARTBEAT_SECONDS} s",
            reason=Reason.UNREACHABLE,
            metadata={"url": api.url},
        ) from exc
    except httpx.TransportError as exc:
        raise ApiError(
            "UNAVAILABLE",
            f"lost the stream from {api.url} ({exc or type(exc).__name__})",
            reason=Reason.UNREACHABLE,
            metadata={"url": api.url},
        ) from exc


def _event(name: str, event_id: str, text: str) -> Event:
    data = json.loads(text)
    if name == "error":
        raise ApiError.of(data)
    return Event(name, event_id, data)


def _refusal(api: ApiClient, path: str, response: httpx.Response) -> ApiError:
    try:
        error = response.json().get("error")
    except ValueError:
        error = None
    if isinstance(error, dict) and "code" in error:
        return ApiError.of(error)
    return ApiError(
        "UNKNOWN",
        f"unexpected answer from {api.url}{path}: HTTP {response.status_code} "
        f"{response.text[:200]!r}; is --url the AgentWorks gateway?",
    )


async def resuming(
    api: ApiClient,
    path: str,
    *,
    last_id: str = "",
    on_retry: Callable[[ApiError, float], None] | None = None,
) -> AsyncIterator[Event]:
    """The events of a stream across reconnects, each opened from the last event's id."""
    pause = RETRY_SECONDS[0]
    while True:
        try:
            async for event in events(api, path, last_id=last_id):
                pause = RETRY_SECONDS[0]
                last_id = event.id or last_id
                yield event
            continue  # ended by the gateway (a drain): open it again at once
        except ApiError as exc:
            if exc.code not in RETRIED:
                raise
            if on_retry is not None:
                on_retry(exc, pause)
        await asyncio.sleep(pause)
        pause = min(pause * 2, RETRY_SECONDS[1])
