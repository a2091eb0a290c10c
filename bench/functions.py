"""Functions benchmarks: call round trip and throughput vs a PostgreSQL job queue; limits.

The job queue is `procrastinate` (psycopg 3 and LISTEN/NOTIFY, like us), and the throughput
is also compared with the agent-protocol peer of the conversation round trip (`a2a-sdk`
with its PostgreSQL task store, bench/conversation.py), both installed for the benchmark
only (`make bench` does it); without one, its comparison is skipped with a note. The
systems run side by side on one PostgreSQL server and are measured in alternating
rounds, so a burst of load from elsewhere on the shared machine hits them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import grpc
import psutil
import psycopg

from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.client.rpc import channel_options
from agentworks.core import errors
from agentworks.core.identity import Minter
from agentworks.core.keys import SigningKey
from agentworks.runtime.executions import ExecutionContext, ExecutionWorker
from agentworks.server.db import libpq_url
from bench.floor_server import CALL, CLAIM, FINISH
from bench.harness import Processes, Report, Row, median, percentile

TARGET = "crew:bench"
RUNTIMES = 8
CALLERS = 32
ROUNDS = 5  # alternating; more rounds, less weight on one burst of outside load
# Open calls allowed per target while measuring round trips: never refuses a call.
ROOMY_LIMIT = 1000

INPUT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}

RoundTrip = Callable[[int], Awaitable[None]]


@dataclass
class Figures:
    """One system's round-trip latencies (ms), throughputs (/s) and CPU per call (ms)."""

    latencies: list[float] = field(default_factory=list)
    throughputs: list[float] = field(default_factory=list)
    cpu_per_call: list[float] = field(default_factory=list)
    statements: float = float("nan")


class CpuMeter:
    """CPU seconds spent by this process, the service processes and the database.

    The database's share is every server process of the benchmark's PostgreSQL
    (backends and background workers), found through pg_stat_activity.
    """

    def __init__(self, database_url: str, pids: list[int]) -> None:
        self.database_url = database_url
        self.pids = [os.getpid(), *pids]
        self._start: dict[int, float] = {}

    def _processes(self) -> list[int]:
        with psycopg.connect(libpq_url(self.database_url), autocommit=True) as conn:
            rows = conn.execute("SELECT pid FROM pg_stat_activity").fetchall()
        return self.pids + [r[0] for r in rows]

    @staticmethod
    def _cpu(pid: int) -> float | None:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            return None
        return t.user + t.system

    def start(self) -> None:
        self._start = {p: c for p in self._processes() if (c := self._cpu(p)) is not None}

    def stop(self) -> float:
        used = 0.0
        for pid in self._processes():
            now = self._cpu(pid)
            if now is not None:
                used += now - self._start.get(pid, 0.0)
        return used


async def closed_loop(op: RoundTrip, concurrency: int, seconds: float) -> int:
    """Operations completed by `concurrency` loops running `op` for `seconds`."""
    done = 0
    stop_at = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await op(next(counter))
            done += 1

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done


async def measure(
    op: RoundTrip, figures: Figures, meter: CpuMeter, calls: int, seconds: float
) -> None:
    """One round: `calls` sequential round trips, then CALLERS loops for `seconds`."""
    for n in range(calls):
        started = time.perf_counter()
        await op(n)
        figures.latencies.append((time.perf_counter() - started) * 1000)
    meter.start()
    started = time.perf_counter()
    done = await closed_loop(op, CALLERS, seconds)
    elapsed = time.perf_counter() - started
    figures.throughputs.append(done / elapsed)
    figures.cpu_per_call.append(meter.stop() / max(done, 1) * 1000)


async def setup_target(address: str, key: SigningKey, *, limit: int) -> None:
    async with FunctionsClient(
        address, identity=Minter("user:ops", key, roles={"operator"})
    ) as ops:
        await ops.register_target(TARGET, owner="user:owner", running_limit=limit)
    async with FunctionsClient(address, identity=Minter("user:owner", key)) as owner:
        await owner.declare_function(
            TARGET, "noop", input_schema=INPUT_SCHEMA, allowed_callers=["user:*"]
        )


@contextlib.asynccontextmanager
async def runtimes(address: str, key: SigningKey, count: int) -> AsyncIterator[None]:
    """`count` SDK execution workers (asyncio tasks in this process) that finish at once."""

    async def handle(ctx: ExecutionContext) -> str:
        return "done"

    with tempfile.TemporaryDirectory(prefix="agentworks-bench-calls-") as root:
        workers = [
            ExecutionWorker(
                address,
                Minter(f"agent:bench/runtime-{i}", key),
                [TARGET],
                handle,
                root=root,
                wait_seconds=20,
                concurrency=1,  # a runtime is one job slot, like one of procrastinate's
            )
            for i in range(count)
        ]
        tasks = [asyncio.create_task(w.run()) for w in workers]
        await asyncio.sleep(0.5)  # every worker is parked in its ClaimExecution long-poll
        try:
            yield
        finally:
            for w in workers:
                w.stop()
            await asyncio.wait(tasks, timeout=30)
            for task in tasks:
                task.cancel()


@contextlib.asynccontextmanager
async def agentworks_system(procs: Processes) -> AsyncIterator[RoundTrip]:
    """The functions service with RUNTIMES SDK workers; yields one call's round trip."""
    address = procs.start("agentworks_functions", "FUNCTIONS")
    await setup_target(address, procs.key, limit=ROOMY_LIMIT)
    async with (
        runtimes(address, procs.key, RUNTIMES),
        FunctionsClient(address, identity=Minter("user:caller", procs.key)) as caller,
    ):

        async def round_trip(n: int) -> None:
            # One request: the call waits for its own end (Call with wait_seconds).
            receipt = await caller.call(TARGET, "noop", {"n": n}, wait_seconds=25)
            if receipt.HasField("outcome"):
                status = receipt.outcome
            else:
                status = await caller.wait(receipt.call_id, timeout=60)
            if state_name(status.status) != "completed":
                raise RuntimeError(f"call ended {state_name(status.status)}: {status.error}")

        yield round_trip


@contextlib.asynccontextmanager
async def floor_system(procs: Processes) -> AsyncIterator[RoundTrip]:
    """The floor of a call round trip (bench/floor_server.py, Jobs): the same two
    requests per round trip on the services' server stack, one INSERT and one UPDATE,
    RUNTIMES runtimes (a channel each, like the SDK's workers) claiming and finishing."""
    address = procs.start("bench.floor_server", "FLOOR", FLOOR_JOBS="1")
    caller = Minter("user:caller", procs.key)

    async def runtime(n: int) -> None:
        identity = Minter(f"agent:bench/runtime-{n}", procs.key)
        async with grpc.aio.insecure_channel(address, options=channel_options()) as chan:
            claim, finish = chan.unary_unary(CLAIM), chan.unary_unary(FINISH)
            job = b""
            while True:
                if not job:
                    job = await claim(b"", metadata=identity.metadata())
                if job:
                    job = await finish(job, metadata=identity.metadata())

    tasks = [asyncio.create_task(runtime(n)) for n in range(RUNTIMES)]
    try:
        async with grpc.aio.insecure_channel(address, options=channel_options()) as chan:
            call = chan.unary_unary(CALL)

            async def round_trip(n: int) -> None:
                if await call(str(n).encode(), metadata=caller.metadata()) != b"completed":
                    raise RuntimeError("the floor's call did not complete")

            yield round_trip
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def procrastinate_available() -> bool:
    try:
        import procrastinate  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.asynccontextmanager
async def procrastinate_system(database_url: str) -> AsyncIterator[RoundTrip]:
    """The same round trip through procrastinate: defer -> a worker runs the job -> done.

    One worker with RUNTIMES concurrent job slots (asyncio, in this process). "Done" is
    the moment the worker's own finish_job (status succeeded) has committed, observed in
    this process: no status polling, so the job queue is measured at its most favourable.
    """
    import procrastinate

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=libpq_url(database_url))
    )
    loop = asyncio.get_running_loop()
    done: dict[int, asyncio.Future[None]] = {}

    def future(job_id: int) -> asyncio.Future[None]:
        if job_id not in done:
            done[job_id] = loop.create_future()
        return done[job_id]

    @app.task(name="noop")
    async def noop(n: int) -> str:
        return "done"

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        manager = app.job_manager
        finish_job = manager.finish_job

        async def finished(job, status, delete_job):  # type: ignore[no-untyped-def]
            await finish_job(job=job, status=status, delete_job=delete_job)
            future(job.id).set_result(None)

        manager.finish_job = finished  # type: ignore[method-assign]
        worker = asyncio.create_task(
            app.run_worker_async(concurrency=RUNTIMES, wait=True, install_signal_handlers=False)
        )
        await asyncio.sleep(0.5)

        async def round_trip(n: int) -> None:
            job_id = await noop.defer_async(n=n)
            await asyncio.wait_for(future(job_id), 60)
            del done[job_id]

        try:
            yield round_trip
        finally:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(worker, 10)


async def call_round_trip(procs: Processes, report: Report, calls: int, seconds: float) -> None:
    """Call -> a runtime claims (long-poll) -> finishes -> the caller sees the end (F4, R1)."""
    ours, theirs = Figures(), Figures()
    have_queue = procrastinate_available()
    if not have_queue:
        report.notes.append(
            "procrastinate is not installed, so the job-queue comparison was skipped: "
            "`make bench` installs it for the benchmark (`.venv/bin/pip install procrastinate`)."
        )
    # The agent-protocol peer of the conversation round trip, doing the equivalent of a
    # call: one task on a new context, answered and completed by its agent (lazy import:
    # bench.conversation imports this module).
    from bench.conversation import (
        a2a_available,
        a2a_system,
        count_statements,
        peer_database,
        statements_enabled,
    )

    peer, have_peer = Figures(), a2a_available()
    floor = Figures()
    async with contextlib.AsyncExitStack() as stack:
        our_trip = await stack.enter_async_context(agentworks_system(procs))
        floor_trip = await stack.enter_async_context(floor_system(procs))
        their_trip = peer_trip = None
        peer_url = ""
        if have_queue:
            their_trip = await stack.enter_async_context(procrastinate_system(procs.database_url))
        if have_peer:
            peer_url = peer_database(procs)
            peer_trip = await stack.enter_async_context(a2a_system(procs, peer_url))
        meter = CpuMeter(procs.database_url, [c.pid for c in procs.children])
        systems = [
            (our_trip, ours),
            (their_trip, theirs),
            (peer_trip, peer),
            (floor_trip, floor),
        ]
        # Warm up pools, prepared plans and caches on each, then alternate rounds. One
        # round trip alone first: the peer's task store makes its table on first use.
        for trip, _ in systems:
            if trip:
                await trip(-1)
                await closed_loop(trip, CALLERS, 1.0)
        per_round = max(1, calls // ROUNDS)
        for _ in range(ROUNDS):
            for trip, figures in systems:
                if trip:
                    await measure(trip, figures, meter, per_round, seconds / ROUNDS)
        if statements_enabled(procs.database_url):  # a separate pass, after the timed ones
            for trip, figures, database in (
                (our_trip, ours, procs.database_url),
                (their_trip, theirs, procs.database_url),  # the same database as ours
                (peer_trip, peer, peer_url),
                (floor_trip, floor, procs.database_url),
            ):
                if trip:
                    figures.statements = await count_statements(
                        procs.database_url, database, trip, CALLERS
                    )

    def base(values: list[float], fn: Callable[[list[float]], float]) -> float:
        return fn(values) if values else float("nan")

    baseline = "procrastinate: defer -> worker -> done" if have_queue else ""
    peer_name = "a2a-sdk 1.3, DatabaseTaskStore: message/send -> task completed"
    scenario = f"call round trip, {RUNTIMES} idle runtimes"
    for pct in (50, 99):
        report.add(
            Row(
                scenario,
                f"Call -> claimed -> finished -> caller sees it, p{pct}",
                percentile(ours.latencies, pct),
                "ms",
                baseline,
                base(theirs.latencies, lambda v, p=pct: percentile(v, p)),
                *p50_target(pct, ours.latencies, theirs.latencies, have_queue),
            )
        )
    ours_tput = median(ours.throughputs)
    theirs_tput = base(theirs.throughputs, median)
    scenario = f"call throughput, {RUNTIMES} runtimes, {CALLERS} callers"
    report.add(
        Row(
            scenario,
            "round trips completed per second (median of rounds)",
            ours_tput,
            "calls/s",
            baseline,
            theirs_tput,
            "≥ 1.0 x the job queue",
            (ours_tput >= theirs_tput) if have_queue else None,
        )
    )
    report.add(
        Row(
            scenario,
            "round trips completed per second (median of rounds)",
            ours_tput,
            "calls/s",
            peer_name if have_peer else "",
            base(peer.throughputs, median),
            "≥ 3 x a2a-sdk",
            (ours_tput >= 3 * median(peer.throughputs)) if have_peer else None,
        )
    )
    floor_name = "the floor: the same 2 requests on our server stack, INSERT + UPDATE"
    floor_tput = median(floor.throughputs)
    report.add(
        Row(
            scenario,
            "round trips completed per second (median of rounds)",
            ours_tput,
            "calls/s",
            floor_name,
            floor_tput,
            "≥ 0.6 of the floor",
            ours_tput >= 0.6 * floor_tput if floor_tput == floor_tput else None,
        )
    )
    if have_queue:
        # What the target asks of the floor itself: a ratio under 1.0 here says no
        # amount of work inside the service can meet it with this round trip's shape.
        report.add(
            Row(
                scenario,
                "the floor's round trips per second (median of rounds)",
                floor_tput,
                "calls/s",
                baseline,
                theirs_tput,
            )
        )
    compared = [
        (figures, name)
        for figures, name in (
            (theirs, baseline),
            (peer, peer_name if have_peer else ""),
            (floor, floor_name),
        )
        if name
    ]
    cpu = "CPU per round trip (bench + services + PostgreSQL)"
    for figures, name in compared:
        ours_cpu, their_cpu = median(ours.cpu_per_call), median(figures.cpu_per_call)
        target, met = (
            ("≤ 1.3 x the job queue", ours_cpu <= 1.3 * their_cpu)
            if (figures is theirs)
            else ("", None)
        )
        report.add(Row(scenario, cpu, ours_cpu, "ms", name, their_cpu, target, met))
    statements = "SQL statements per round trip (pg_stat_statements, separate pass)"
    if ours.statements == ours.statements:  # measured (not NaN)
        for figures, name in compared:
            report.add(
                Row(scenario, statements, ours.statements, "statements", name, figures.statements)
            )
    report.notes.append(
        f"Call round trip: the {RUNTIMES} runtimes are `ExecutionWorker`s of the runtime "
        "SDK, asyncio tasks in the benchmark process, each long-polling ClaimExecution when "
        "idle; under load each finish claims the runtime's next execution (`claim_next`). "
        "The caller's Call waits for the call's end (`wait_seconds`): two requests per round "
        f"trip. procrastinate runs one worker with {RUNTIMES} concurrent slots in the same "
        f"process. The agent-protocol peer is the a2a-sdk 1.3 agent of the conversation "
        "round trip (its own process, PostgreSQL task store in its own database): each "
        "round trip is one non-streaming `message/send` on a new context, the task stored, "
        "answered and completed. "
        f"Throughput: {CALLERS} closed-loop callers; {ROUNDS} alternating rounds "
        "per system, median reported. CPU per round trip adds the CPU time of every "
        "process involved (a load-independent view of cost on this shared machine). "
        f"Statements: pg_stat_statements (BEGIN/COMMIT included) over 2 s at {CALLERS} "
        "callers per system after the timed rounds; procrastinate shares our database, so "
        "each count also holds the other's idle polls (a few a second). "
        "The floor (bench/floor_server.py, Jobs) is the round trip's shape with nothing "
        "else: on the services' gRPC server stack (identity interceptor included), Call "
        "inserts a row and waits in-process for its end, a runtime's Claim takes the next "
        "job from an in-process queue and marks it running, Finish marks it done and the "
        "next one running in one UPDATE and returns it; no protobuf, validation, "
        "authorisation, events, notifications or replicas."
    )


async def limit_contention(procs: Processes, report: Report, burst: int, limit: int) -> None:
    """`burst` concurrent calls at a running limit of `limit`: exactly `limit` accepted (F5).

    Baselines: the same burst on a target whose limit is never reached (concurrency
    without contention), and calls one at a time.
    """
    address = procs.start("agentworks_functions", "FUNCTIONS")
    async with (
        FunctionsClient(address, identity=Minter("user:ops", procs.key, roles={"operator"})) as ops,
        FunctionsClient(address, identity=Minter("user:owner", procs.key)) as owner,
    ):
        for name, running_limit in (("crew:contended", limit), ("crew:roomy", ROOMY_LIMIT)):
            await ops.register_target(name, owner="user:owner", running_limit=running_limit)
            await owner.declare_function(
                name, "noop", input_schema=INPUT_SCHEMA, allowed_callers=["user:*"]
            )
    async with FunctionsClient(address, identity=Minter("user:caller", procs.key)) as caller:

        async def call(target: str, n: int) -> tuple[float, str | None]:
            started = time.perf_counter()
            try:
                receipt = await caller.call(target, "noop", {"n": n})
            except errors.Busy:
                return (time.perf_counter() - started) * 1000, None
            return (time.perf_counter() - started) * 1000, receipt.call_id

        async def bursts(target: str) -> tuple[list[float], list[int]]:
            latencies, accepted_counts = [], []
            for _ in range(5):
                results = await asyncio.gather(*(call(target, n) for n in range(burst)))
                accepted = [call_id for _, call_id in results if call_id]
                accepted_counts.append(len(accepted))
                latencies += [ms for ms, _ in results]
                await asyncio.gather(*(caller.cancel(c) for c in accepted))
            return latencies, accepted_counts

        sequential: list[float] = []
        for n in range(20 + burst):  # the first 20 warm up
            ms, call_id = await call("crew:roomy", n)
            if n >= 20:
                sequential.append(ms)
            if call_id:
                await caller.cancel(call_id)
        roomy, _ = await bursts("crew:roomy")
        contended, accepted_counts = await bursts("crew:contended")
    exact = all(n == limit for n in accepted_counts)
    scenario = f"running limit {limit}, {burst} concurrent calls"
    report.add(
        Row(
            scenario,
            "calls accepted, worst burst (all 5: " + ", ".join(map(str, accepted_counts)) + ")",
            float(max(accepted_counts, key=lambda n: abs(n - limit))),
            "calls",
            target=f"exactly {limit} every burst",
            met=exact,
        )
    )
    for pct in (50, 99):
        for baseline, values in (
            (f"same burst, limit {ROOMY_LIMIT} (no contention)", roomy),
            ("one call at a time", sequential),
        ):
            report.add(
                Row(
                    scenario,
                    f"Call answer (accepted or busy), p{pct}",
                    percentile(contended, pct),
                    "ms",
                    baseline,
                    percentile(values, pct),
                )
            )


def p50_target(
    pct: int, ours: list[float], theirs: list[float], have_queue: bool
) -> tuple[str, bool | None]:
    """Issue 40: one caller's p50 at most 1.3 x the job queue's."""
    if pct != 50 or not have_queue:
        return "", None
    return "≤ 1.3 x the job queue", percentile(ours, 50) <= 1.3 * percentile(theirs, 50)
