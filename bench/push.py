"""Push benchmarks (N5): a Subscribe stream's wake latency beside the long-poll's, in the
same run; what an idle stream costs (memory, SQL statements); a WatchCall stream's
latency beside a GetStatus long-poll's, for a call's changes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import psutil
import psycopg

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import PAST_EVERY_PAGE
from agentworks.core.identity import Minter
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from bench.harness import Processes, Report, Row, percentile

# Statements of the bench database, the measuring queries themselves left out.
_STATEMENTS = (
    "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s "
    "JOIN pg_database d ON d.oid = s.dbid "
    "WHERE d.datname = current_database() AND s.query NOT ILIKE '%pg_stat_statements%'"
)

# The target whose calls the call-watch benchmark follows.
WATCHED = "crew:watch"


async def _register(address: str, key: object, target: str) -> None:
    async with MessagingClient(
        address,
        identity=Minter("user:ops", key, roles={"operator"}),  # type: ignore[arg-type]
    ) as ops:
        await ops.register_target(target, owner="user:ops")


async def _live(events: AsyncIterator[m.InboxEvent]) -> None:
    """Wait for a stream's first heartbeat: its backlog is through, it is parked."""
    async for event in events:
        if event.WhichOneof("event") == "heartbeat":
            return


async def wake_latency(procs: Processes, report: Report, sends: int, readers: int) -> None:
    """Receipt of an agent's reply -> the reader has it: a Subscribe stream's event and a
    long-polling Read's return, in alternation on one replica (N5)."""
    key = procs.key
    address = procs.start("agentworks_messaging", "MESSAGING")
    await _register(address, key, "crew:push")
    user = Minter("user:reader", key)
    async with (
        MessagingClient(address, identity=user) as reader,
        MessagingClient(address, identity=Minter("agent:push/bot", key)) as agent,
    ):
        polled = [(await reader.send("open", target="crew:push")).inbox_id for _ in range(readers)]
        streamed = [
            (await reader.send("open", target="crew:push")).inbox_id for _ in range(readers)
        ]
        arrived: dict[str, asyncio.Event] = {i: asyncio.Event() for i in polled + streamed}
        arrived_at: dict[str, float] = {}
        stop = asyncio.Event()

        def got(inbox: str) -> None:
            arrived_at[inbox] = time.perf_counter()
            arrived[inbox].set()

        async def poll(inbox: str) -> None:
            cursor = ""
            while not stop.is_set():
                page = await reader.read(inbox, after=cursor, wait_seconds=25)
                if page.messages:
                    got(inbox)
                cursor = page.next_cursor

        async def follow(inbox: str, events: AsyncIterator[m.InboxEvent]) -> None:
            async for _ in events:
                got(inbox)

        streams = [reader.subscribe(i, heartbeats=True) for i in streamed]
        for events in streams:
            await _live(events)
        tasks = [asyncio.create_task(poll(i)) for i in polled]
        tasks += [asyncio.create_task(follow(i, e)) for i, e in zip(streamed, streams, strict=True)]
        await asyncio.sleep(1.0)  # every long-poll is parked too
        latencies: dict[str, list[float]] = {"stream": [], "long-poll": []}
        for n in range(2 * sends):
            kind = "stream" if n % 2 else "long-poll"
            inbox = (streamed if n % 2 else polled)[(n // 2) % readers]
            arrived[inbox].clear()
            await agent.send_message(inbox, f"wake {n}")
            receipt_at = time.perf_counter()
            await asyncio.wait_for(arrived[inbox].wait(), 30)
            latencies[kind].append(max(0.0, arrived_at[inbox] - receipt_at) * 1000)
            await asyncio.sleep(0.002)  # let the reader park again
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    scenario = f"push wake latency, {readers} streams + {readers} long-polls, one replica"
    for pct in (50, 99):
        stream = percentile(latencies["stream"], pct)
        poll_ = percentile(latencies["long-poll"], pct)
        report.add(
            Row(
                scenario,
                f"receipt -> stream event, p{pct}",
                stream,
                "ms",
                f"receipt -> long-poll returns, p{pct}",
                poll_,
                "as fast as the long-poll (≤ it + 1 ms)",
                stream <= poll_ + 1.0,
            )
        )


async def idle_stream_cost(procs: Processes, report: Report, streams: int, seconds: float) -> None:
    """Resident memory per idle Subscribe stream (beside an idle long-poll's, each on a
    replica of its own), and SQL statements per idle stream per minute (pg_stat_statements;
    sweepers off, so what runs is the readers')."""
    key = procs.key
    quiet = {"MESSAGING_SWEEP_SECONDS": "3600"}
    stream_replica = procs.start("agentworks_messaging", "MESSAGING", **quiet)
    stream_process = psutil.Process(procs.children[-1].pid)
    poll_replica = procs.start("agentworks_messaging", "MESSAGING", **quiet)
    poll_process = psutil.Process(procs.children[-1].pid)
    await _register(stream_replica, key, "crew:idle")
    user = Minter("user:idle", key)
    async with (
        MessagingClient(stream_replica, identity=user) as streaming,
        MessagingClient(poll_replica, identity=user) as polling,
        await psycopg.AsyncConnection.connect(procs.database_url, autocommit=True) as db,
    ):
        inboxes = [
            (await streaming.send("open", target="crew:idle")).inbox_id for _ in range(streams)
        ]
        await streaming.read(inboxes[0])
        await polling.read(inboxes[0])  # both replicas' pools and plans are warm
        await asyncio.sleep(0.5)

        before = stream_process.memory_info().rss
        opened = [streaming.subscribe(i, heartbeat_seconds=5, heartbeats=True) for i in inboxes]
        for events in opened:
            await _live(events)
        await asyncio.sleep(1.0)
        per_stream = (stream_process.memory_info().rss - before) / streams / 1024

        async def beat(events: AsyncIterator[m.InboxEvent]) -> None:
            async for _ in events:  # heartbeats: read, so the stream never stalls
                pass

        beating = [asyncio.create_task(beat(e)) for e in opened]

        await db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

        async def statements_over(window: float) -> float:
            await db.execute("SELECT pg_stat_statements_reset()")
            await asyncio.sleep(window)
            row = await (await db.execute(_STATEMENTS)).fetchone()
            return float(row[0]) if row else 0.0

        await db.execute("SELECT pg_stat_statements_reset()")
        await streaming.read(inboxes[0])
        if not float((await (await db.execute(_STATEMENTS)).fetchone() or [0])[0]):
            raise RuntimeError("pg_stat_statements did not count a Read's statements")
        idle_with_streams = await statements_over(seconds)
        for task in beating:
            task.cancel()
        await asyncio.gather(*beating, return_exceptions=True)
        idle_without = await statements_over(seconds)

        before = poll_process.memory_info().rss
        polls = [asyncio.create_task(polling.read(i, wait_seconds=25)) for i in inboxes]
        await asyncio.sleep(3.0)  # all parked
        per_poll = (poll_process.memory_info().rss - before) / streams / 1024
        for poll in polls:
            poll.cancel()
        await asyncio.gather(*polls, return_exceptions=True)

    scenario = f"idle streams ({streams})"
    report.add(
        Row(
            scenario,
            "messaging RSS per idle stream",
            per_stream,
            "KiB",
            "RSS per idle long-poll reader",
            per_poll,
            "stated, small",
        )
    )
    per_minute = (idle_with_streams - idle_without) / streams / (seconds / 60)
    report.add(
        Row(
            scenario,
            "SQL statements per idle stream per minute (heartbeats every 5 s)",
            per_minute,
            "statements",
            target="0 (N5)",
            met=per_minute <= 0.0,
        )
    )
    report.notes.append(
        f"Idle streams: {streams} Subscribe streams with 5 s heartbeats on one replica, "
        f"idle for {seconds:g} s: {idle_with_streams:g} statements in the bench database "
        f"(pg_stat_statements; both replicas' sweepers off), against {idle_without:g} in "
        "the same window after the streams closed; the row is the difference per stream "
        "and minute. Memory is the replica's RSS growth when the streams open (after "
        "warm-up), beside a second replica's growth when as many long-polling Reads park: "
        "each figure is one process's, so neither reuses the other's freed memory."
    )


async def call_watch_latency(procs: Processes, report: Report, changes: int, calls: int) -> None:
    """A change of a call (its runtime's progress report) -> the watcher has it: a
    WatchCall stream's next status beside a GetStatus long-poll's return (`seen_version`),
    in alternation on one replica (N1, N5)."""
    key = procs.key
    messaging = procs.start("agentworks_messaging", "MESSAGING")
    functions = procs.start(
        "agentworks_functions", "FUNCTIONS", FUNCTIONS_MESSAGING_ADDRESS=messaging
    )
    async with FunctionsClient(
        functions, identity=Minter("user:ops", key, roles={"operator"})
    ) as ops:
        await ops.register_target(WATCHED, owner="user:owner", running_limit=2 * calls)
    async with FunctionsClient(functions, identity=Minter("user:owner", key)) as owner:
        await owner.declare_function(
            WATCHED, "long", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
    async with (
        FunctionsClient(functions, identity=Minter("user:watcher", key)) as watcher,
        FunctionsClient(functions, identity=Minter("agent:watch/bot", key)) as runtime,
    ):
        polled = [(await watcher.call(WATCHED, "long", {})).call_id for _ in range(calls)]
        streamed = [(await watcher.call(WATCHED, "long", {})).call_id for _ in range(calls)]
        for _ in range(2 * calls):  # every call running: its changes are progress reports
            if await runtime.claim_execution([WATCHED], wait_seconds=10) is None:
                raise RuntimeError("a call was not claimed")
        arrived: dict[str, asyncio.Event] = {c: asyncio.Event() for c in polled + streamed}
        arrived_at: dict[str, float] = {}

        def got(call_id: str) -> None:
            arrived_at[call_id] = time.perf_counter()
            arrived[call_id].set()

        async def poll(call_id: str, version: int) -> None:
            while True:  # the task's loop: the status past every message and event page
                status = await watcher.get_status(
                    call_id,
                    after=PAST_EVERY_PAGE,
                    message_limit=1,
                    after_event=PAST_EVERY_PAGE,
                    event_limit=1,
                    wait_seconds=25,
                    seen_version=version,
                )
                if status.version > version:
                    version = status.version
                    got(call_id)

        async def follow(call_id: str, stream: AsyncIterator[f.CallChange]) -> None:
            async for change in stream:
                if change.WhichOneof("change") == "status":
                    got(call_id)

        streams = [
            watcher.watch_call(c, after=PAST_EVERY_PAGE, after_event=PAST_EVERY_PAGE)
            for c in streamed
        ]
        for stream in streams:
            await anext(stream)  # the status now: the stream is open
        versions = [(await watcher.get_status(c)).version for c in polled]
        tasks = [asyncio.create_task(poll(c, v)) for c, v in zip(polled, versions, strict=True)]
        tasks += [asyncio.create_task(follow(c, s)) for c, s in zip(streamed, streams, strict=True)]
        await asyncio.sleep(1.0)  # every long-poll is parked too
        latencies: dict[str, list[float]] = {"stream": [], "long-poll": []}
        for n in range(2 * changes):
            kind = "stream" if n % 2 else "long-poll"
            call_id = (streamed if n % 2 else polled)[(n // 2) % calls]
            arrived[call_id].clear()
            await runtime.report(call_id, progress=f"step {n}", sequence=n + 1)
            receipt_at = time.perf_counter()
            await asyncio.wait_for(arrived[call_id].wait(), 30)
            latencies[kind].append(max(0.0, arrived_at[call_id] - receipt_at) * 1000)
            await asyncio.sleep(0.002)  # let the watcher park again
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    scenario = (
        f"call change stream vs GetStatus poll, {calls} WatchCall streams + {calls} "
        "long-polls, one replica"
    )
    for pct in (50, 99):
        stream = percentile(latencies["stream"], pct)
        poll_ = percentile(latencies["long-poll"], pct)
        report.add(
            Row(
                scenario,
                f"progress report receipt -> WatchCall status, p{pct}",
                stream,
                "ms",
                f"receipt -> GetStatus long-poll returns, p{pct}",
                poll_,
                "as fast as the long-poll (≤ it + 1 ms)",
                stream <= poll_ + 1.0,
            )
        )
    report.notes.append(
        "Call change stream: the change is a runtime's progress report on a running call "
        "(the report's gRPC call returned: its receipt), learnt by the caller from a "
        "WatchCall stream (FunctionsClient.watch_call) or from a GetStatus long-poll with "
        "`seen_version` (wait_seconds 25, the loop a task poller runs), in alternation, "
        "on calls that each have one watcher; both past every message and event page, "
        "so only the call's own change wakes them. Clamped at 0 like the inboxes' wake "
        "latency."
    )
