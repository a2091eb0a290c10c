"""WatchCall and WatchCallEnds (N1, N5): a call's changes on one open stream until it
ends, and the ends of a caller's calls from a cursor, through the typed client's
iterators; same access rule as GetStatus (A3); one of the principal's waits for the
stream's life (B7); no statement while a stream idles (N5)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.core import errors
from agentworks.core.errors import Busy, InvalidArgument, NotFound, Reason
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.server import queries
from agentworks.server import shares as shares_module
from agentworks.server.shares import Share, Shares
from agentworks.server.testing import until

pytestmark = pytest.mark.timeout(60)


async def _next(changes: AsyncIterator[pb.CallChange], timeout: float = 5.0) -> pb.CallChange:
    return await asyncio.wait_for(anext(changes), timeout)


class Collected:
    """A watch drained in the background: every status it yields, in order."""

    def __init__(self, changes: AsyncIterator[pb.CallChange]) -> None:
        self.statuses: list[pb.CallStatus] = []
        self.ended = False
        self._task = asyncio.create_task(self._drain(changes))

    async def _drain(self, changes: AsyncIterator[pb.CallChange]) -> None:
        async for change in changes:
            self.statuses.append(change.status)
        self.ended = True

    @property
    def last(self) -> pb.CallStatus:
        return self.statuses[-1]

    async def wait_for(self, check, timeout: float = 5.0) -> pb.CallStatus:
        await until(lambda: self.statuses and check(self.last), timeout)
        return self.last

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_a_watch_streams_a_call_from_start_to_end_then_ends_N1_F7_F11(clients, echo, runtime):
    """N1 F7 F11 F8: the status now, then a status at each change: progress, each message
    and event once (after the cursors), the question while waiting_for_input, running
    again after the reply, the uploaded file, and the terminal status with the answer,
    after which the iterator ends by itself."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    watch = Collected(alice.watch_call(call_id))
    try:
        first = await watch.wait_for(lambda s: True)
        assert state_name(first.status) == "running" and not first.started
        execution = await runtime.claim_execution(["crew:demo"])
        assert execution is not None and execution.call_id == call_id
        await watch.wait_for(lambda s: s.started)

        await runtime.report(call_id, progress="reading", messages=["m0", "m1"])
        await watch.wait_for(lambda s: s.progress == "reading" and s.next_after == 1)
        await runtime.report(call_id, messages=["m2"], events=[{"kind": "note", "text": "e0"}])
        await watch.wait_for(lambda s: s.next_after == 2 and s.next_after_event == 0)

        await runtime.ask_input(call_id, "ask-1", "Which colour?")
        asked = await watch.wait_for(lambda s: s.question == "Which colour?")
        assert state_name(asked.status) == "waiting_for_input"
        await alice.reply(call_id, "blue")
        await watch.wait_for(lambda s: state_name(s.status) == "running" and not s.question)

        await runtime.upload_file(call_id, "out.txt", b"done\n", media_type="text/plain")
        await watch.wait_for(lambda s: [f.name for f in s.files] == ["out.txt"])
        await runtime.finish_execution(call_id, final_message="all done")
        await until(lambda: watch.ended, 5)
    finally:
        await watch.close()
    end = watch.last
    assert state_name(end.status) == "completed" and end.answer == "all done"
    messages = [m.text for s in watch.statuses for m in s.messages]
    events = [e.text for s in watch.statuses for e in s.events]
    assert messages == ["m0", "m1", "m2"]  # each once, in order
    assert events == ["e0"]
    versions = [s.version for s in watch.statuses]
    assert versions == sorted(set(versions))  # every status is a change
    assert sum(1 for s in watch.statuses if state_name(s.status) == "completed") == 1


async def test_a_watch_resumes_from_its_cursors_and_pages_an_ended_calls_messages_N1_F7(
    clients, echo, runtime
):
    """N1 F7: a watch of an ended call from message and event cursors sends only what is
    after them, every page of a long transcript (60 messages: 50, then 10) and ends; a
    watch given the terminal status's version (seen_version) ends with nothing sent."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    await runtime.claim_execution(["crew:demo"])
    await runtime.report(call_id, messages=[f"m{n}" for n in range(60)])
    await runtime.report(call_id, events=[{"kind": "note", "text": f"e{n}"} for n in range(3)])
    await runtime.finish_execution(call_id, final_message="done")

    statuses = [c.status async for c in alice.watch_call(call_id, after=4, after_event=0)]
    assert [len(s.messages) for s in statuses] == [50, 5]
    assert [m.text for s in statuses for m in s.messages] == [f"m{n}" for n in range(5, 60)]
    assert [e.text for s in statuses for e in s.events] == ["e1", "e2"]
    assert all(state_name(s.status) == "completed" for s in statuses)

    end = statuses[-1]
    request = pb.WatchCallRequest(
        call_id=call_id,
        after=end.next_after,
        after_event=end.next_after_event,
        seen_version=end.version,
    )
    stream = alice.stub.WatchCall(request, metadata=alice._metadata())
    assert await asyncio.wait_for(stream.read(), 5) is grpc.aio.EOF


async def test_an_idle_watch_sends_heartbeats_and_runs_no_statement_N1_N5(
    start_functions, identity, monkeypatch
):
    """N1 N5: heartbeats come every heartbeat_seconds (5, the least) while the call does
    not change; over that idle time the replica runs no SQL statement (every named query
    is traced; the sweeper and the notice outbox's timer are off). A report then wakes
    the watch at once, with one read."""
    replica = await start_functions(
        FUNCTIONS_SWEEP_SECONDS="3600",
        FUNCTIONS_NOTICE_RETRY_SECONDS="3600",
        FUNCTIONS_POLL_FALLBACK_SECONDS="3600",
    )
    ops = FunctionsClient(replica.address, identity=identity("user:ops", {"operator"}))
    owner = FunctionsClient(replica.address, identity=identity("user:owner"))
    alice = FunctionsClient(replica.address, identity=identity("user:alice"))
    bot = FunctionsClient(replica.address, identity=identity("agent:demo/bot"))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        await ops.register_target("crew:demo", owner="user:owner")
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        await owner.declare_function(
            "crew:demo", "echo", input_schema=schema, allowed_callers=["user:*"]
        )
        call_id = (await alice.call("crew:demo", "echo", {"text": "hi"})).call_id
        await bot.claim_execution(["crew:demo"])
        changes = alice.watch_call(call_id, heartbeat_seconds=5, heartbeats=True)
        assert (await _next(changes)).status.started
        monkeypatch.setattr(queries, "tracer", provider.get_tracer("test"))
        started = time.monotonic()
        beat = await _next(changes, timeout=10)
        idle = time.monotonic() - started
        assert beat.WhichOneof("change") == "heartbeat" and beat.heartbeat.at.seconds > 0
        assert 4.5 <= idle < 7, idle
        # N5: the watch runs no statement while idle. The replica's sweeper (its first
        # round at start, the next in an hour) may land in the window on a loaded machine.
        sweeper = {"expired_executions", "unclaimed_calls", "purge_unlinked_blobs"}
        assert [s.name for s in exporter.get_finished_spans() if s.name not in sweeper] == []

        exporter.clear()  # before the report: the watch may read before report() returns
        sent = time.monotonic()
        await bot.report(call_id, progress="step 2")
        change = await _next(changes)
        assert change.status.progress == "step 2"
        assert time.monotonic() - sent < 2  # woken by NOTIFY, not a timer

        def reads() -> list[str]:
            return [s.name for s in exporter.get_finished_spans() if s.name == "call_status_page"]

        await until(reads, 2)
        assert reads() == ["call_status_page"]  # one read per wake
        await changes.aclose()  # type: ignore[attr-defined]
    finally:
        for client in (ops, owner, alice, bot):
            await client.close()
        provider.shutdown()


async def test_another_principals_call_is_not_found_and_the_operator_may_watch_A3_N1(
    clients, echo, operator
):
    """A3 N1: as for GetStatus, another principal's (or a made-up) call is NOT_FOUND; the
    operator and the target's owner may watch it."""
    alice = await clients("user:alice")
    bob = await clients("user:bob")
    owner = await clients("user:owner")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    for call in (call_id, "00000000-0000-4000-8000-000000000000", "not-an-id"):
        with pytest.raises(NotFound):
            await anext(bob.watch_call(call))
    for reader in (operator, owner):
        changes = reader.watch_call(call_id)
        assert (await _next(changes)).status.call_id == call_id
        await changes.aclose()  # type: ignore[attr-defined]


async def test_bad_watch_requests_are_refused_with_their_field_N1(clients, echo):
    """N1 F7: heartbeat_seconds outside 5-60 is refused by the proto's rule (FIELD_RULE
    naming the field), on both streams; a cursor below -1 is FIELD_RULE naming it; a
    malformed WatchCallEnds cursor is INVALID_ARGUMENT."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    for seconds in (4, 61, -1):
        for changes in (
            alice.watch_call(call_id, heartbeat_seconds=seconds),
            alice.watch_call_ends(heartbeat_seconds=seconds),
        ):
            with pytest.raises(InvalidArgument) as refused:
                await anext(changes)
            assert refused.value.reason == Reason.FIELD_RULE
            assert refused.value.metadata.get("field") == "heartbeat_seconds"
    for cursors in ({"after": -2}, {"after_event": -5}):
        with pytest.raises(InvalidArgument) as refused:
            await anext(alice.watch_call(call_id, **cursors))
        assert refused.value.reason == Reason.FIELD_RULE
        assert refused.value.metadata.get("field") == next(iter(cursors))
    with pytest.raises(InvalidArgument) as refused:
        await anext(alice.watch_call_ends(after="not-a-cursor"))
    assert refused.value.metadata.get("field") == "after"


async def test_call_ends_come_in_order_once_each_from_any_cursor_N1(
    clients, echo, runtime, database_url
):
    """N1 F12 F15: the ends of alice's own calls (completed, failed, cancelled, and
    interrupted by the sweeper when the lease lapsed) in the order they ended, each a
    full terminal status with its cursor; a heartbeat says the stream is live and carries
    the cursor reached; from a middle cursor the rest come, each once; bob's ends and
    alice's open calls are not among them."""
    alice = await clients("user:alice")
    bob = await clients("user:bob")
    calls = [(await alice.call("crew:demo", echo, {"text": f"c{n}"})).call_id for n in range(3)]
    await bob.call("crew:demo", echo, {"text": "bob's"})  # the 4th: the target's limit
    for _ in range(4):
        await runtime.claim_execution(["crew:demo"], lease_seconds=30)
    await runtime.upload_file(calls[0], "a.txt", b"a", media_type="text/plain")
    await runtime.finish_execution(calls[0], final_message="zero")
    await runtime.finish_execution(calls[1], failed=True, error="broke")
    await alice.cancel(calls[2])
    calls.append((await alice.call("crew:demo", echo, {"text": "c3"})).call_id)
    open_call = (await alice.call("crew:demo", echo, {"text": "open"})).call_id
    assert (await runtime.claim_execution(["crew:demo"], lease_seconds=30)).call_id == calls[3]

    changes = alice.watch_call_ends(heartbeats=True)
    try:
        ends = [await _next(changes) for _ in range(3)]
        assert [c.status.call_id for c in ends] == calls[:3]
        assert [state_name(c.status.status) for c in ends] == ["completed", "failed", "cancelled"]
        assert ends[0].status.answer == "zero" and [f.name for f in ends[0].status.files] == [
            "a.txt"
        ]
        assert ends[1].status.error == "broke"
        assert len({c.cursor for c in ends}) == 3
        live = await _next(changes)
        assert live.WhichOneof("change") == "heartbeat" and live.cursor == ends[-1].cursor

        # The sweeper interrupts a call whose lease lapsed: the end reaches the stream.
        await runtime.heartbeat_execution(calls[3], lease_seconds=1)
        interrupted = await _next(changes, timeout=10)
        assert interrupted.status.call_id == calls[3]
        assert state_name(interrupted.status.status) == "interrupted"
    finally:
        await changes.aclose()  # type: ignore[attr-defined]

    rest = alice.watch_call_ends(after=ends[0].cursor)
    try:
        assert [(await _next(rest)).status.call_id for _ in range(3)] == calls[1:]
    finally:
        await rest.aclose()  # type: ignore[attr-defined]
    status = await alice.get_status(open_call)
    assert state_name(status.status) == "running"  # an open call is no end


@pytest.fixture
def two_waits():
    """Two long-polls or streams at once per principal; restored afterwards."""
    before = shares_module.shares()
    shares_module.configure(Shares(Share(waits=2)))
    yield
    shares_module.configure(before)


async def test_watches_hold_the_principals_waits_B7_N1(two_waits, clients, echo, functions):
    """B7 N1: each open watch (of a call or of call ends) holds one of its principal's
    waits: with a share of two, the third is refused RESOURCE_EXHAUSTED (share waits)
    before any statement, and a closed watch gives its place back."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    held = [alice.watch_call(call_id), alice.watch_call_ends(heartbeats=True)]
    for changes in held:
        await _next(changes)
    for changes in (alice.watch_call(call_id), alice.watch_call_ends()):
        with pytest.raises(Busy) as refused:
            await anext(changes)
        assert refused.value.metadata.get("share") == "waits"
    waiting = functions.database.listener.waiting
    await held.pop().aclose()  # type: ignore[attr-defined]
    await until(lambda: functions.database.listener.waiting == waiting - 1, 5)
    held.append(alice.watch_call(call_id))
    assert (await _next(held[-1])).status.call_id == call_id
    for changes in held:
        await changes.aclose()  # type: ignore[attr-defined]


async def test_a_draining_replica_ends_its_watches_unavailable_at_once_N1_P4(
    clients, echo, functions
):
    """N1 P4: when the replica drains, its open watches end at once with UNAVAILABLE
    (reason DRAINING), so clients resume on another replica."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "hi"})).call_id
    stream = alice.stub.WatchCall(pb.WatchCallRequest(call_id=call_id), metadata=alice._metadata())
    assert (await stream.read()).status.call_id == call_id
    ends = alice.stub.WatchCallEnds(pb.WatchCallEndsRequest(), metadata=alice._metadata())
    assert (await ends.read()).WhichOneof("change") == "heartbeat"
    started = time.monotonic()
    stopping = asyncio.create_task(functions.stop(10))
    for call in (stream, ends):
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await asyncio.wait_for(call.read(), 5)
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        refusal = errors.from_trailers(
            ended.value.code(), ended.value.details() or "", ended.value.trailing_metadata()
        )
        assert refusal.reason == Reason.DRAINING
    await stopping
    assert time.monotonic() - started < 5
