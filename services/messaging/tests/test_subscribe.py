"""Subscribe (N1, N5): an inbox's messages on one open stream, from a cursor, through the
typed client's iterator; same access rule as Read (A3); one of the principal's waits for
the stream's life (B7); no statement while it idles (N5)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentworks.client import MessagingClient
from agentworks.core import errors
from agentworks.core.errors import Busy, InvalidArgument, NotFound, PermissionDenied, Reason
from agentworks.core.identity import Minter
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.server import queries
from agentworks.server import shares as shares_module
from agentworks.server.shares import Share, Shares
from agentworks.server.testing import until
from agentworks_messaging.store import INBOX_CHANNEL
from tests.fixtures.neighbours import Victim, assert_unharmed

pytestmark = pytest.mark.timeout(60)


async def _next(events: AsyncIterator[m.InboxEvent], timeout: float = 5.0) -> m.InboxEvent:
    return await asyncio.wait_for(anext(events), timeout)


async def _texts(events: AsyncIterator[m.InboxEvent], count: int) -> list[str]:
    return [(await _next(events)).message.text for _ in range(count)]


@pytest.fixture
async def chat(clients, demo):
    """(alice, bot, alice's inbox): alice started a conversation with crew:demo."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("hello", target=demo)
    return alice, bot, receipt.inbox_id


async def test_subscribe_streams_the_backlog_then_live_messages_each_with_its_cursor_N1(chat):
    """N1 C7: the messages already there come first, oldest first, then a heartbeat says
    the stream is live, then each new reply as it is sent; every event's cursor is the
    one Read gives after the same message."""
    alice, bot, inbox = chat
    for text in ("one", "two", "three"):
        await bot.send_message(inbox, text)
    events = alice.subscribe(inbox, heartbeats=True)
    try:
        backlog = [await _next(events) for _ in range(3)]
        assert [e.message.text for e in backlog] == ["one", "two", "three"]
        live = await _next(events)
        assert live.WhichOneof("event") == "heartbeat"
        assert live.cursor == backlog[-1].cursor  # a heartbeat carries the position
        page = await alice.read(inbox)
        assert page.next_cursor == backlog[-1].cursor
        first = await alice.read(inbox, limit=1)
        assert first.next_cursor == backlog[0].cursor

        sent_at = time.monotonic()
        await bot.send_message(inbox, "four")
        event = await _next(events)
        assert event.message.text == "four"
        assert time.monotonic() - sent_at < 2  # woken by NOTIFY, not a timer
        assert (await alice.read(inbox, after=backlog[-1].cursor)).next_cursor == event.cursor
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def test_a_cursor_resumes_a_stream_with_nothing_lost_or_repeated_N1(chat):
    """N1: a stream closed after two of four messages, resumed from the last event's
    cursor (or a Read's next_cursor), yields exactly the rest, then what comes later."""
    alice, bot, inbox = chat
    for n in range(4):
        await bot.send_message(inbox, f"m{n}")
    events = alice.subscribe(inbox)
    first = [await _next(events) for _ in range(2)]
    await events.aclose()  # type: ignore[attr-defined]
    assert [e.message.text for e in first] == ["m0", "m1"]

    await bot.send_message(inbox, "m4")
    events = alice.subscribe(inbox, after=first[-1].cursor)
    try:
        assert await _texts(events, 3) == ["m2", "m3", "m4"]
        await bot.send_message(inbox, "m5")
        assert await _texts(events, 1) == ["m5"]
    finally:
        await events.aclose()  # type: ignore[attr-defined]

    page = await alice.read(inbox, limit=5)
    events = alice.subscribe(inbox, after=page.next_cursor)
    try:
        assert await _texts(events, 1) == ["m5"]
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def test_an_idle_stream_sends_heartbeats_and_runs_no_statement_N1_N5(
    start_messaging, identity, monkeypatch
):
    """N1 N5: heartbeats come every heartbeat_seconds (5, the least) while nothing
    arrives, each with the current cursor; over that idle time the replica runs no SQL
    statement at all (every named query is traced here; the sweeper is off). A message
    then wakes the stream at once, with one read."""
    replica = await start_messaging(MESSAGING_SWEEP_SECONDS="3600")
    ops = MessagingClient(replica.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(replica.address, identity=identity("user:alice"))
    bot = MessagingClient(replica.address, identity=identity("agent:demo/bot"))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(queries, "tracer", provider.get_tracer("test"))
    try:
        await ops.register_target("crew:demo", owner="user:owner")
        inbox = (await alice.send("hello", target="crew:demo")).inbox_id
        # The reply's NOTIFY reaches this process's listener before the stream opens:
        # a late one would wake the stream (one read) in the idle window measured below.
        with replica.database.listener.subscribe(INBOX_CHANNEL, [inbox]) as notified:
            await bot.send_message(inbox, "first")
            assert await notified.wait(5)
        events = alice.subscribe(inbox, heartbeat_seconds=5, heartbeats=True)
        assert (await _next(events)).message.text == "first"
        live = await _next(events)  # caught up
        assert live.WhichOneof("event") == "heartbeat"
        exporter.clear()
        started = time.monotonic()
        beat = await _next(events, timeout=10)
        idle = time.monotonic() - started
        assert beat.WhichOneof("event") == "heartbeat" and beat.cursor == live.cursor
        assert 4.5 <= idle < 7, idle
        assert beat.heartbeat.at.seconds > 0
        assert [s.name for s in exporter.get_finished_spans()] == []  # N5: no statement

        exporter.clear()  # before the send: its NOTIFY may wake the stream before it returns
        await bot.send_message(inbox, "second")
        event = await _next(events)
        assert event.message.text == "second"
        # The stream's one read; the rest are the send's own statements.
        names = [s.name for s in exporter.get_finished_spans()]
        assert names.count("read_inbox") == 1, names
        await events.aclose()  # type: ignore[attr-defined]
    finally:
        for client in (ops, alice, bot):
            await client.close()
        provider.shutdown()


async def test_another_principals_inbox_is_not_found_and_a_runtime_reads_none_A3_N1(
    chat, clients, signing_keys
):
    """A3 N1: as for Read, another principal's (or a made-up) inbox is NOT_FOUND, and a
    runtime credential's identity (T2) is refused PERMISSION_DENIED even for an inbox of
    its own target's conversations."""
    _, _, inbox = chat
    bob = await clients("user:bob")
    with pytest.raises(NotFound):
        await anext(bob.subscribe(inbox))
    with pytest.raises(NotFound):
        await anext(bob.subscribe("00000000-0000-4000-8000-000000000000"))
    key = signing_keys.ensure("gateway")[0]
    scoped = Minter("agent:demo/bot", key, targets={"crew:demo"})
    async with MessagingClient(channel=bob.channel, identity=scoped) as runtime:
        with pytest.raises(PermissionDenied) as refused:
            await anext(runtime.subscribe(inbox))
    assert refused.value.reason == Reason.OUT_OF_SCOPE


async def test_bad_subscribe_requests_are_refused_with_their_field_N1(chat):
    """N1 C7: heartbeat_seconds outside 5-60 is refused by the proto's rule (FIELD_RULE,
    naming the field), as is a missing inbox_id (its min_len rule); a malformed cursor is
    INVALID_ARGUMENT."""
    alice, _, inbox = chat
    for seconds in (4, 61, -1):
        with pytest.raises(InvalidArgument) as refused:
            await anext(alice.subscribe(inbox, heartbeat_seconds=seconds))
        assert refused.value.reason == Reason.FIELD_RULE
        assert refused.value.metadata.get("field") == "heartbeat_seconds"
    with pytest.raises(InvalidArgument):
        await anext(alice.subscribe(inbox, after="not-a-cursor"))
    with pytest.raises(InvalidArgument) as refused:
        await anext(alice.subscribe(""))
    assert refused.value.reason == Reason.FIELD_RULE
    assert refused.value.metadata.get("field") == "inbox_id"


async def test_a_draining_replica_ends_its_streams_unavailable_at_once_N1_P4(chat, messaging):
    """N1 P4: when the replica drains, its open streams end at once with UNAVAILABLE
    (reason DRAINING), so clients resume on another replica; the stop does not wait
    out its grace for them."""
    alice, bot, inbox = chat
    await bot.send_message(inbox, "before")
    call = alice.stub.Subscribe(m.SubscribeRequest(inbox_id=inbox), metadata=alice._metadata())
    assert (await call.read()).message.text == "before"
    await call.read()  # the caught-up heartbeat
    started = time.monotonic()
    stopping = asyncio.create_task(messaging.stop(10))
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await asyncio.wait_for(call.read(), 5)
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
    refusal = errors.from_trailers(
        ended.value.code(), ended.value.details() or "", ended.value.trailing_metadata()
    )
    assert refusal.reason == Reason.DRAINING
    await stopping
    assert time.monotonic() - started < 5


@pytest.fixture
def two_waits():
    """Two long-polls or streams at once per principal; restored afterwards."""
    before = shares_module.shares()
    shares_module.configure(Shares(Share(waits=2)))
    yield
    shares_module.configure(before)


@pytest.mark.alone  # times a victim beside 80 busy streams
async def test_streams_hold_the_principals_waits_and_spare_another_tenant_B7_N1(
    two_waits, clients, demo, messaging
):
    """B7 N1: each open stream holds one of its principal's waits: with a share of two,
    the third is refused RESOURCE_EXHAUSTED (share waits) before any statement, and a
    closed stream gives its place back. Many streams of many principals, woken by a
    steady flow of messages, leave another tenant's Read p99 within 3x its calm p99."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    inbox = (await alice.send("hello", target=demo)).inbox_id
    held = [alice.subscribe(inbox, heartbeats=True) for _ in range(2)]
    for events in held:
        await _next(events)  # live
    with pytest.raises(Busy) as refused:
        await anext(alice.subscribe(inbox))
    assert refused.value.metadata.get("share") == "waits"
    await held.pop().aclose()  # type: ignore[attr-defined]
    await until(lambda: messaging.database.listener.waiting == 1, 5)
    held.append(alice.subscribe(inbox, heartbeats=True))
    await _next(held[-1])

    bob = await clients("user:bob")
    own = (await bob.send("mine", target=demo)).inbox_id
    victim = Victim(lambda: bob.read(own))
    calm = await victim.measure(seconds=1.5)

    # 40 principals with two streams each on their own inbox; a message to one of them
    # every 10 ms wakes two streams, each reading it.
    crowd: list[tuple[str, AsyncIterator[m.InboxEvent]]] = []
    for n in range(40):
        user = await clients(f"user:crowd{n}")
        box = (await user.send("hi", target=demo)).inbox_id
        for _ in range(2):
            events = user.subscribe(box, heartbeats=True)
            await _next(events)
            crowd.append((box, events))
    assert messaging.database.listener.waiting == 2 + 80
    stop = asyncio.Event()
    received = 0

    async def drain(events: AsyncIterator[m.InboxEvent]) -> None:
        nonlocal received
        async for _ in events:
            received += 1

    async def flow() -> None:
        n = 0
        while not stop.is_set():
            await bot.send_message(crowd[(2 * n) % len(crowd)][0], f"wake {n}")
            n += 1
            await asyncio.sleep(0.01)

    readers = [asyncio.create_task(drain(events)) for _, events in crowd]
    sender = asyncio.create_task(flow())
    try:
        loud = await victim.measure_under(calm, seconds=2.5)
    finally:
        stop.set()
        await sender
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for events in held:
            await events.aclose()  # type: ignore[attr-defined]
    assert received > 20, received
    assert_unharmed(calm, loud, "80 open streams woken by a message every 10 ms")
