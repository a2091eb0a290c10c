"""The conversation round trip against the agent-protocol peer (issue 27).

An external caller sends into its conversation, a runtime claims the turn and replies,
and the caller's waiting Read returns the reply (C2, C6, C7, C10, R1). The peer is
`a2a-sdk` serving an agent with its PostgreSQL `DatabaseTaskStore` (bench/a2a_server.py):
message in over HTTP, task and reply stored, reply returned. It is installed for the
benchmark only (`make bench` does it); without it that comparison is skipped with a note.

Both systems run side by side on one PostgreSQL server (the peer in a database of its
own, so statements are counted per system) and are measured in alternating rounds at 1
and at 32 closed-loop callers. SQL statements per round trip come from
pg_stat_statements in a separate pass after the timed rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import psycopg
import sqlalchemy as sa

from agentworks.client import MessagingClient
from agentworks.core.identity import Minter
from agentworks.runtime.turns import TurnContext, TurnWorker
from agentworks.server.db import libpq_url, with_database
from bench.functions import CpuMeter
from bench.harness import Processes, Report, Row, free_port, median, percentile

TARGET = "crew:bench"
RUNTIMES = 8
CONCURRENCIES = (1, 32)
ROUNDS = 3

RoundTrip = Callable[[int], Awaitable[None]]


@dataclass
class Figures:
    """One system at one concurrency: latencies (ms), throughputs (/s), CPU (ms) per trip."""

    latencies: list[float] = field(default_factory=list)
    throughputs: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    statements: float = float("nan")


async def closed_loop(op: RoundTrip, concurrency: int, seconds: float) -> list[float]:
    """The latencies (ms) of the round trips `concurrency` loops complete in `seconds`."""
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def loop(slot: int) -> None:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            await op(slot)
            latencies.append((time.perf_counter() - started) * 1000)

    await asyncio.gather(*(loop(slot) for slot in range(concurrency)))
    return latencies


async def measure(
    op: RoundTrip, figures: Figures, meter: CpuMeter, concurrency: int, seconds: float
) -> None:
    meter.start()
    started = time.perf_counter()
    latencies = await closed_loop(op, concurrency, seconds)
    elapsed = time.perf_counter() - started
    figures.latencies += latencies
    figures.throughputs.append(len(latencies) / elapsed)
    figures.cpu.append(meter.stop() / max(len(latencies), 1) * 1000)


def statements_enabled(database_url: str) -> bool:
    """Whether pg_stat_statements is loaded (harness.postgres(stat_statements=True))."""
    try:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
    except psycopg.Error:
        return False
    return True


async def count_statements(
    stats_url: str, database_url: str, op: RoundTrip, concurrency: int
) -> float:
    """Statements run in `database_url`'s database per round trip, over a short closed
    loop; read through `stats_url`, the database with the extension."""
    name = sa.engine.make_url(database_url).database
    with psycopg.connect(libpq_url(stats_url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        done = len(await closed_loop(op, concurrency, 2.0))
        [(calls,)] = conn.execute(
            "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s "
            "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s "
            "AND s.query NOT LIKE '%%pg_stat_statements%%'",
            (name,),
        ).fetchall()
    return float(calls) / max(done, 1)


@contextlib.asynccontextmanager
async def agentworks_system(procs: Processes) -> AsyncIterator[RoundTrip]:
    """Messaging with RUNTIMES SDK turn workers that reply; yields one caller's trip."""
    address = procs.start("agentworks_messaging", "MESSAGING")
    async with MessagingClient(
        address, identity=Minter("user:ops", procs.key, roles={"operator"})
    ) as ops:
        await ops.register_target(TARGET, owner="user:owner")

    async def reply(ctx: TurnContext) -> None:
        await ctx.send_message("benchmark reply", end_turn=True)

    workers = [
        TurnWorker(address, Minter(f"agent:bench/runtime-{i}", procs.key), [TARGET], reply)
        for i in range(RUNTIMES)
    ]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    conversations: dict[int, list[str]] = {}  # slot -> [inbox, cursor]
    async with MessagingClient(address, identity=Minter("user:caller", procs.key)) as caller:

        async def round_trip(slot: int) -> None:
            if slot not in conversations:
                receipt = await caller.send("benchmark message", target=TARGET)
                conversations[slot] = [receipt.inbox_id, ""]
            else:
                await caller.send("benchmark message", inbox_id=conversations[slot][0])
            state = conversations[slot]
            while True:
                page = await caller.read(state[0], after=state[1], wait_seconds=25)
                state[1] = page.next_cursor
                if page.messages:
                    return

        await asyncio.sleep(0.5)  # every worker is parked in its ClaimTurn long-poll
        try:
            yield round_trip
        finally:
            for w in workers:
                w.stop()
            await asyncio.wait(tasks, timeout=30)
            for task in tasks:
                task.cancel()


def a2a_available() -> bool:
    try:
        import a2a.server.tasks  # noqa: F401
    except ImportError:
        return False
    return True


def start_peer(procs: Processes, database_url: str) -> tuple[str, subprocess.Popen[bytes]]:
    """Start bench/a2a_server.py on a free port (stopped with `procs`): (URL, process)."""
    port = free_port()
    asyncpg_url = sa.engine.make_url(database_url).set(drivername="postgresql+asyncpg")
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.a2a_server"],
        env={
            "A2A_LISTEN": f"127.0.0.1:{port}",
            "A2A_DATABASE_URL": asyncpg_url.render_as_string(hide_password=False),
            "PATH": "/usr/bin:/bin",
        },
        stdout=subprocess.DEVNULL,
    )
    procs.children.append(child)
    return f"http://127.0.0.1:{port}", child


def peer_database(procs: Processes) -> str:
    """A new database for the peer's task store, beside the benchmark's: its URL."""
    own = sa.engine.make_url(procs.database_url).database
    peer_url = with_database(procs.database_url, f"{own}_a2a")
    with psycopg.connect(libpq_url(procs.database_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{sa.engine.make_url(peer_url).database}"')
    return peer_url


@contextlib.asynccontextmanager
async def a2a_system(procs: Processes, database_url: str) -> AsyncIterator[RoundTrip]:
    """The a2a-sdk agent server (a process of its own); yields one caller's trip."""
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

    from bench.a2a_server import card

    url, child = start_peer(procs, database_url)
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(url + "/.well-known/agent-card.json")).status_code == 200:
                    break
            if time.monotonic() > deadline or child.poll() is not None:
                raise RuntimeError("the a2a-sdk server did not start")
            await asyncio.sleep(0.2)
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card(url))
        contexts: dict[int, str] = {}

        async def round_trip(slot: int) -> None:
            context_id = contexts.setdefault(slot, str(uuid.uuid4()))
            message = Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                context_id=context_id,
                parts=[Part(text="benchmark message")],
            )
            answers = [a async for a in client.send_message(SendMessageRequest(message=message))]
            last = answers[-1] if answers else None
            if last is None or last.task.status.state != TaskState.TASK_STATE_COMPLETED:
                raise RuntimeError(f"a2a round trip did not complete: {last}")

        yield round_trip


async def conversation_round_trip(procs: Processes, report: Report, seconds: float) -> None:
    """Send -> turn claimed -> reply -> the caller's waiting Read returns (C2, C6, C7, C10)."""
    ours = {c: Figures() for c in CONCURRENCIES}
    theirs = {c: Figures() for c in CONCURRENCIES}
    have_peer = a2a_available()
    if not have_peer:
        report.notes.append(
            "a2a-sdk is not installed, so the conversation comparison was skipped: `make "
            "bench` installs it for the benchmark (`pip install 'a2a-sdk[http-server,"
            "postgresql]==1.3.0'`)."
        )
    peer_url = peer_database(procs)
    async with contextlib.AsyncExitStack() as stack:
        our_trip = await stack.enter_async_context(agentworks_system(procs))
        their_trip = None
        if have_peer:
            their_trip = await stack.enter_async_context(a2a_system(procs, peer_url))
        meter = CpuMeter(procs.database_url, [c.pid for c in procs.children])
        for concurrency in CONCURRENCIES:  # warm up pools, prepared plans and caches
            await closed_loop(our_trip, concurrency, 1.0)
            if their_trip:
                await closed_loop(their_trip, concurrency, 1.0)
        for _ in range(ROUNDS):
            for concurrency in CONCURRENCIES:
                await measure(our_trip, ours[concurrency], meter, concurrency, seconds / ROUNDS)
                if their_trip:
                    await measure(
                        their_trip, theirs[concurrency], meter, concurrency, seconds / ROUNDS
                    )
        if statements_enabled(procs.database_url):
            for concurrency in CONCURRENCIES:
                ours[concurrency].statements = await count_statements(
                    procs.database_url, procs.database_url, our_trip, concurrency
                )
                if their_trip:
                    theirs[concurrency].statements = await count_statements(
                        procs.database_url, peer_url, their_trip, concurrency
                    )
    _report(report, ours, theirs, have_peer)


def _report(
    report: Report, ours: dict[int, Figures], theirs: dict[int, Figures], have_peer: bool
) -> None:
    baseline = "a2a-sdk 1.3, DatabaseTaskStore" if have_peer else ""
    for concurrency in CONCURRENCIES:
        us, them = ours[concurrency], theirs[concurrency]
        scenario = f"conversation round trip, {RUNTIMES} runtimes, {concurrency} caller(s)"

        def peer(value: float) -> float:
            return value if have_peer else float("nan")

        for pct in (50, 99):
            report.add(
                Row(
                    scenario,
                    f"Send -> turn -> reply -> Read returns, p{pct}",
                    percentile(us.latencies, pct),
                    "ms",
                    baseline,
                    peer(percentile(them.latencies, pct)),
                )
            )
        tput, their_tput = median(us.throughputs), peer(median(them.throughputs))
        report.add(
            Row(
                scenario,
                "round trips per second (median of rounds)",
                tput,
                "trips/s",
                baseline,
                their_tput,
                "≥ 2 x a2a-sdk",
                (tput >= 2 * their_tput) if have_peer else None,
            )
        )
        cpu, their_cpu = median(us.cpu), peer(median(them.cpu))
        report.add(
            Row(
                scenario,
                "CPU per round trip (bench + services + PostgreSQL)",
                cpu,
                "ms",
                baseline,
                their_cpu,
                "≤ 0.7 x a2a-sdk",
                (cpu <= 0.7 * their_cpu) if have_peer else None,
            )
        )
        report.add(
            Row(
                scenario,
                "SQL statements per round trip (pg_stat_statements, separate pass)",
                us.statements,
                "statements",
                baseline,
                peer(them.statements),
                "≤ 10",
                us.statements <= 10 if us.statements == us.statements else None,
            )
        )
    report.notes.append(
        f"Conversation round trip: each caller has its own conversation and sends into it "
        f"(Send with its inbox), then long-polls Read until the reply is there. The {RUNTIMES} "
        "runtimes are `TurnWorker`s of the runtime SDK (asyncio tasks in the benchmark "
        "process) whose handler replies once. The peer is an a2a-sdk 1.3 agent "
        "(bench/a2a_server.py, uvicorn, JSON-RPC, non-streaming `message/send`) whose "
        "executor answers with a reply message and completes the task, stored by its "
        "`DatabaseTaskStore` in the same PostgreSQL server; its client is a2a-sdk's own "
        f"over httpx. {ROUNDS} alternating rounds per system and concurrency, medians; "
        "latency percentiles over all round trips of the rounds. Statements: "
        "pg_stat_statements (BEGIN/COMMIT included) over 2 s per system and concurrency, "
        "after the timed rounds, each system in its own database."
    )
