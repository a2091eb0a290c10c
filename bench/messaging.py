"""Messaging benchmarks: send throughput vs RPC and database floors; wake latency; memory."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable

import grpc
import psutil
import psycopg

from agentworks.client import MessagingClient
from agentworks.client.rpc import channel_options
from agentworks.core.identity import Minter
from bench.floor_server import METHOD
from bench.harness import Processes, Report, Row, median, percentile

ROUNDS = 5  # alternating rounds per measurement of send throughput


async def rate(op: Callable[[], Awaitable[object]], concurrency: int, seconds: float) -> float:
    """Operations per second with `concurrency` loops running `op` for `seconds`."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await op()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


def _inserter(free: asyncio.Queue[psycopg.AsyncConnection]) -> Callable[[], Awaitable[None]]:
    """One single-row INSERT + COMMIT on a free connection: the database floor."""

    async def insert() -> None:
        conn = await free.get()
        try:
            await conn.execute("INSERT INTO bench_floor VALUES (%s, %s)", (uuid.uuid4(), "x" * 40))
        finally:
            free.put_nowait(conn)

    return insert


async def send_throughput(procs: Processes, report: Report, seconds: float) -> None:
    messaging = procs.start("agentworks_messaging", "MESSAGING")
    floor = procs.start("bench.floor_server", "FLOOR")
    key = procs.key
    async with MessagingClient(
        messaging, identity=Minter("user:ops", key, roles={"operator"})
    ) as ops:
        await ops.register_target("crew:bench", owner="user:ops")

    with psycopg.connect(procs.database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id uuid PRIMARY KEY, body text)")

    minter = Minter("user:bench", key)
    async with (
        MessagingClient(messaging, identity=minter) as client,
        grpc.aio.insecure_channel(floor, options=channel_options()) as chan,
    ):
        empty = chan.unary_unary(METHOD)

        async def floor_call() -> None:
            await empty(b"", metadata=minter.metadata())

        async def send() -> None:
            await client.send("benchmark message", target="crew:bench")

        for concurrency in (1, 32):
            conns = [
                await psycopg.AsyncConnection.connect(procs.database_url, autocommit=True)
                for _ in range(concurrency)
            ]
            free: asyncio.Queue[psycopg.AsyncConnection] = asyncio.Queue()
            for c in conns:
                free.put_nowait(c)

            insert = _inserter(free)

            await rate(send, concurrency, 1.0)  # warm up pools and prepared plans
            # Short alternating rounds, medians: a checkpoint or a burst of load from
            # elsewhere lands on all three alike instead of on one of them. The order
            # turns each round, so none always runs right after the same one (the
            # database floor's burst of commits used to precede every send round).
            floors: list[float] = []
            db_floors: list[float] = []
            sent: list[float] = []
            kinds = [(floor_call, floors), (insert, db_floors), (send, sent)]
            for n in range(ROUNDS):
                for op, results in kinds[n % 3 :] + kinds[: n % 3]:
                    results.append(await rate(op, concurrency, seconds / ROUNDS))
            rpc_floor, db_floor, sends = median(floors), median(db_floors), median(sent)
            for c in conns:
                await c.close()
            target = "≥ 0.50 of RPC floor" if concurrency == 32 else ""
            report.add(
                Row(
                    f"send throughput, {concurrency} sender(s)",
                    "Send (new conversation) via gRPC",
                    sends,
                    "msg/s",
                    "empty unary RPC (RPC floor)",
                    rpc_floor,
                    target,
                    (sends / rpc_floor >= 0.5) if concurrency == 32 else None,
                )
            )
            report.add(
                Row(
                    f"send throughput, {concurrency} sender(s)",
                    "Send (new conversation) via gRPC",
                    sends,
                    "msg/s",
                    "psycopg INSERT+COMMIT (DB floor)",
                    db_floor,
                )
            )
    report.notes.append(
        f"Send throughput: the RPC floor, the database floor and sends alternate in {ROUNDS} "
        f"rounds of {seconds / ROUNDS:g} s at each concurrency, in an order that turns each "
        "round; each figure is the median of its rounds."
    )


async def wake_latency(
    procs: Processes, report: Report, sends: int, readers: int, replicas: int
) -> None:
    """Time from an agent's SendMessage receipt to the long-polling reader's return."""
    key = procs.key
    addresses = [procs.start("agentworks_messaging", "MESSAGING") for _ in range(replicas)]
    writer_addr, reader_addr = addresses[0], addresses[-1]
    async with MessagingClient(
        writer_addr, identity=Minter("user:ops", key, roles={"operator"})
    ) as ops:
        await ops.register_target("crew:wake", owner="user:ops")
    user = Minter("user:reader", key)
    async with (
        MessagingClient(writer_addr, identity=user) as starter,
        MessagingClient(reader_addr, identity=user) as reader,
        MessagingClient(writer_addr, identity=Minter("agent:wake/bot", key)) as agent,
    ):
        inboxes = [
            (await starter.send("open", target="crew:wake")).inbox_id for _ in range(readers)
        ]
        returned: dict[str, asyncio.Event] = {i: asyncio.Event() for i in inboxes}
        returned_at: dict[str, float] = {}
        stop = asyncio.Event()

        async def poll(inbox: str) -> None:
            cursor = ""
            while not stop.is_set():
                page = await reader.read(inbox, after=cursor, wait_seconds=25)
                if page.messages:
                    returned_at[inbox] = time.perf_counter()
                    returned[inbox].set()
                cursor = page.next_cursor

        tasks = [asyncio.create_task(poll(i)) for i in inboxes]
        await asyncio.sleep(1.0)  # every reader is now parked in its long-poll
        from_receipt: list[float] = []
        from_send: list[float] = []
        for n in range(sends):
            inbox = inboxes[n % readers]
            returned[inbox].clear()
            started = time.perf_counter()
            await agent.send_message(inbox, f"wake {n}")
            receipt_at = time.perf_counter()
            await asyncio.wait_for(returned[inbox].wait(), 30)
            from_receipt.append(max(0.0, returned_at[inbox] - receipt_at) * 1000)
            from_send.append((returned_at[inbox] - started) * 1000)
            await asyncio.sleep(0.002)  # let the reader park again
        stop.set()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    where = "one replica" if replicas == 1 else f"across {replicas} replicas"
    p50, p99 = percentile(from_receipt, 50), percentile(from_receipt, 99)
    report.add(
        Row(
            f"wake latency, {readers} readers, {where}",
            "receipt -> reader returns, p50",
            p50,
            "ms",
            target="≤ 5 ms",
            met=p50 <= 5,
        )
    )
    report.add(
        Row(
            f"wake latency, {readers} readers, {where}",
            "receipt -> reader returns, p99",
            p99,
            "ms",
            target="≤ 50 ms",
            met=p99 <= 50,
        )
    )
    report.add(
        Row(
            f"wake latency, {readers} readers, {where}",
            "send start -> reader returns, median",
            median(from_send),
            "ms",
        )
    )


async def idle_reader_memory(procs: Processes, report: Report, readers: int) -> None:
    """Resident memory the messaging process spends per waiting long-poll reader."""
    key = procs.key
    address = procs.start("agentworks_messaging", "MESSAGING")
    process = psutil.Process(procs.children[-1].pid)
    async with MessagingClient(
        address, identity=Minter("user:ops", key, roles={"operator"})
    ) as ops:
        await ops.register_target("crew:idle", owner="user:ops")
    user = Minter("user:idle", key)
    async with MessagingClient(address, identity=user) as client:
        inboxes = [(await client.send("open", target="crew:idle")).inbox_id for _ in range(readers)]
        await asyncio.sleep(0.5)
        before = process.memory_info().rss
        tasks = [asyncio.create_task(client.read(i, wait_seconds=25)) for i in inboxes]
        await asyncio.sleep(3.0)  # all parked
        after = process.memory_info().rss
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    report.add(
        Row(
            f"idle long-poll readers ({readers})",
            "messaging RSS per waiting reader",
            (after - before) / readers / 1024,
            "KiB",
            target="stated, small",
        )
    )
