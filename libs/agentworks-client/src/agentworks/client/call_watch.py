"""The functions client's push streams (N1): WatchCall and WatchCallEnds as async
iterators that resume by themselves. `FunctionsClient` (`agentworks.client.functions`)
has these methods."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentworks.client.rpc import ServiceClient
from agentworks.client.streams import SILENCE_SLACK_SECONDS, resuming
from agentworks.functions.v1 import functions_pb2 as f

ENDED_STATES = frozenset(
    {f.CALL_STATE_COMPLETED, f.CALL_STATE_FAILED, f.CALL_STATE_INTERRUPTED, f.CALL_STATE_CANCELLED}
)

# The server's heartbeat interval when a watch leaves it 0 (WatchCallRequest).
HEARTBEAT_DEFAULT_SECONDS = 15


class CallWatching(ServiceClient):
    """WatchCall and WatchCallEnds of `FunctionsClient`."""

    async def watch_call(
        self,
        call_id: str,
        *,
        after: int = -1,
        after_event: int = -1,
        heartbeat_seconds: int = 0,
        heartbeats: bool = False,
    ) -> AsyncIterator[f.CallChange]:
        """The call's status now, then a status at each change (progress, the messages
        and events after `after` / `after_event`, the question, files, the state) until
        its terminal status, the last event yielded (N1).

        The stream is opened again from the last status's `next_after`,
        `next_after_event` and `version` whenever it breaks (a replica drained or
        killed, a connection reset), so no message or event is yielded twice and none
        is lost. Heartbeats (every `heartbeat_seconds`, 5-60, default 15, while nothing
        changes) are yielded only with `heartbeats`. A refusal (NOT_FOUND for a call you
        may not see, INVALID_ARGUMENT, RESOURCE_EXHAUSTED past your share of open
        streams) is raised.
        """

        def request_for(cursor: tuple[int, int, int]) -> f.WatchCallRequest:
            request = f.WatchCallRequest(
                call_id=call_id,
                after=cursor[0],
                after_event=cursor[1],
                heartbeat_seconds=heartbeat_seconds,
            )
            if cursor[2] >= 0:
                request.seen_version = cursor[2]
            return request

        def cursor_of(change: f.CallChange) -> tuple[int, int, int] | None:
            if change.WhichOneof("change") != "status":
                return None
            status = change.status
            return (status.next_after, status.next_after_event, status.version)

        changes = resuming(
            self,
            "WatchCall",
            request_for,
            cursor_of,
            cursor=(after, after_event, -1),
            silence_seconds=(heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS)
            + SILENCE_SLACK_SECONDS,
            ends=lambda change: (
                change.WhichOneof("change") == "status" and change.status.status in ENDED_STATES
            ),
        )
        async for change in changes:
            if heartbeats or change.WhichOneof("change") == "status":
                yield change

    async def watch_call_ends(
        self, *, after: str = "", heartbeat_seconds: int = 0, heartbeats: bool = False
    ) -> AsyncIterator[f.CallChange]:
        """The ends of your own calls after the cursor `after` ("": from the first one
        kept), in the order they ended, then each new end as it happens (N1); never
        ends on its own.

        Each change's `status` is the call's terminal status (files, answer, result,
        error; its messages and events pages are empty: read them with `get_status`)
        and its `cursor` resumes after it, here or after a restart. The stream is opened
        again from the last cursor whenever it breaks, so each end is yielded exactly
        once. Heartbeats (with the cursor reached) are yielded only with `heartbeats`.
        """
        changes = resuming(
            self,
            "WatchCallEnds",
            lambda cursor: f.WatchCallEndsRequest(
                after=cursor, heartbeat_seconds=heartbeat_seconds
            ),
            lambda change: change.cursor,
            cursor=after,
            silence_seconds=(heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS)
            + SILENCE_SLACK_SECONDS,
        )
        async for change in changes:
            if heartbeats or change.WhichOneof("change") == "status":
                yield change
