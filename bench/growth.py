"""Growth benchmarks: messaging with a large stored history; the scheduler with many timers.

The history is bulk-loaded with INSERT ... SELECT generate_series straight into
messaging's tables, keeping their invariants: every conversation has its inbox, positions
are per conversation (a question at 3j+1, its handled delivery at 3j+2, the agent's
answer at 3j+3) and `conversations.last_position` is the last of them. Nothing is pending,
so the turn queue is empty, as in a system whose runtimes keep up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import psycopg

from agentworks.client import MessagingClient
from agentworks.core.identity import Minter
from agentworks.server.db import libpq_url, with_database
from agentworks_messaging.service import encode_cursor
from agentworks_scheduler.app import SchedulerRunning
from agentworks_scheduler.app import start as start_scheduler_service
from agentworks_scheduler.config import Config as SchedulerConfig
from bench.harness import Processes, Report, Row, free_port, percentile

TARGET_NAME = "growth"
TARGET = f"crew:{TARGET_NAME}"
USER = "user:growth"
AGENT = f"agent:{TARGET_NAME}/bot"
PAGE = 5  # every loaded conversation has at least this many answers to read
TICK_SECONDS = 0.2


@dataclass(frozen=True)
class Scale:
    conversations: int
    exchanges: int  # question + answer pairs per conversation

    @property
    def messages(self) -> int:
        return self.conversations * self.exchanges * 2

    def label(self) -> str:
        return f"{_power(self.messages)} msgs / {_power(self.conversations)} conv"


def _power(n: int) -> str:
    exponent = len(str(n)) - 1
    return f"10^{exponent}" if n == 10**exponent else f"{n:,}"


def load_history(database_url: str, scale: Scale, sample: int) -> tuple[float, list[str]]:
    """Bulk-load `scale` for USER <-> TARGET: (seconds, `sample` random loaded inboxes)."""
    started = time.perf_counter()
    params = {
        "n": scale.conversations,
        "k": scale.exchanges,
        "name": TARGET_NAME,
        "user": USER,
        "agent": AGENT,
    }
    with psycopg.connect(libpq_url(database_url)) as conn:
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute(
            """
            CREATE TEMP TABLE load_conv ON COMMIT DROP AS
            SELECT gen_random_uuid() AS cid, gen_random_uuid() AS iid,
                   now() - interval '1 day' + g * interval '1 ms' AS at
            FROM generate_series(1, %(n)s) g
            """,
            params,
        )
        conn.execute(
            """
            INSERT INTO messaging.conversations
                (id, target_kind, target_name, started_by, last_position, pending_deliveries,
                 created_at)
            SELECT cid, 'crew', %(name)s, %(user)s, 3 * %(k)s, 0, at FROM load_conv
            """,
            params,
        )
        conn.execute(
            """
            INSERT INTO messaging.inboxes (id, conversation_id, principal, created_at)
            SELECT iid, cid, %(user)s, at FROM load_conv
            """,
            params,
        )
        conn.execute(
            """
            CREATE TEMP TABLE load_exchange ON COMMIT DROP AS
            SELECT cid, iid, j, gen_random_uuid() AS question_id,
                   at + j * interval '1 s' AS at
            FROM load_conv, generate_series(0, %(k)s - 1) j
            """,
            params,
        )
        conn.execute(
            """
            INSERT INTO messaging.messages
                (id, conversation_id, position, inbox_id, direction, sender, channel, text,
                 created_at)
            SELECT question_id, cid, 3 * j + 1, iid, 'to_target', %(user)s, 'programmatic',
                   'question ' || j || ': what is the status of ticket ' || j || '?', at
            FROM load_exchange
            UNION ALL
            SELECT gen_random_uuid(), cid, 3 * j + 3, iid, 'to_inbox', %(agent)s,
                   'programmatic',
                   'answer ' || j || ': the ticket is being handled, I will report back.', at
            FROM load_exchange
            """,
            params,
        )
        conn.execute(
            """
            INSERT INTO messaging.deliveries
                (id, conversation_id, position, kind, message_id, status, created_at)
            SELECT gen_random_uuid(), cid, 3 * j + 2, 'message', question_id, 'handled', at
            FROM load_exchange
            """
        )
        inboxes = [
            str(r[0])
            for r in conn.execute(
                "SELECT iid FROM load_conv ORDER BY random() LIMIT %s", (sample,)
            ).fetchall()
        ]
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(
            "VACUUM ANALYZE messaging.conversations, messaging.inboxes, messaging.messages, "
            "messaging.deliveries"
        )
        conn.execute("CHECKPOINT")  # the load's dirty pages are written now, not mid-measure
    return time.perf_counter() - started, inboxes


async def latencies(op: Callable[[int], Awaitable[object]], count: int) -> list[float]:
    out = []
    for n in range(count):
        started = time.perf_counter()
        await op(n)
        out.append((time.perf_counter() - started) * 1000)
    return out


def operations(
    client: MessagingClient, inboxes: list[str], exchanges: int
) -> dict[str, Callable[[int], Awaitable[object]]]:
    """The measured operations against one history."""

    async def send_new(n: int) -> None:
        await client.send(f"new conversation {n}", target=TARGET)

    async def send_continue(n: int) -> None:
        inbox = inboxes[n % len(inboxes)]
        await client.send(f"follow-up {n}", inbox_id=inbox)

    rng = random.Random(7)

    async def read_page(n: int) -> None:
        inbox = inboxes[n % len(inboxes)]
        # A cursor anywhere that leaves at least PAGE answers after it.
        start = rng.randrange(0, exchanges - PAGE + 1)
        page = await client.read(inbox, after=encode_cursor(3 * start), limit=PAGE)
        if len(page.messages) != PAGE:
            raise RuntimeError(f"expected a page of {PAGE}, got {len(page.messages)}")

    return {
        "Read (page of 5 answers)": read_page,
        "Send (continue)": send_continue,
        "Send (new conversation)": send_new,
    }


def second_database(database_url: str) -> str:
    """Another empty database on the same server (dropped with the scenario's server)."""
    name = f"aw_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(database_url, name)


def drop_database(database_url: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(libpq_url(database_url))["dbname"]
    admin = with_database(database_url, "postgres")
    with psycopg.connect(libpq_url(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def history_growth(
    procs: Processes, report: Report, small: Scale, large: Scale, count: int
) -> None:
    """Send and page-read latency with a small and a large stored history.

    Each history has its own database on the same PostgreSQL server and its own
    messaging process; the operations alternate between the two in rounds, so a change
    of load on the shared machine hits both alike.
    """
    urls = {small: second_database(procs.database_url), large: procs.database_url}
    try:
        await _history_growth(procs, report, small, large, count, urls)
    finally:
        for process in procs.children:  # the small history's messaging goes with its database
            process.terminate()
        drop_database(urls[small])


async def _history_growth(
    procs: Processes,
    report: Report,
    small: Scale,
    large: Scale,
    count: int,
    urls: dict[Scale, str],
) -> None:
    clients: dict[Scale, MessagingClient] = {}
    loaded: dict[Scale, float] = {}
    ops: dict[Scale, dict[str, Callable[[int], Awaitable[object]]]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for scale in (small, large):
            address = procs.start(
                "agentworks_messaging", "MESSAGING", MESSAGING_DATABASE_URL=urls[scale]
            )
            async with MessagingClient(
                address, identity=Minter("user:ops", procs.key, roles={"operator"})
            ) as admin:
                await admin.register_target(TARGET, owner="user:ops")
            loaded[scale], inboxes = await asyncio.to_thread(load_history, urls[scale], scale, 1000)
            print(f"  loaded {scale.label()} in {loaded[scale]:.1f} s", flush=True)
            clients[scale] = await stack.enter_async_context(
                MessagingClient(address, identity=Minter(USER, procs.key))
            )
            ops[scale] = operations(clients[scale], inboxes, scale.exchanges)
        results: dict[Scale, dict[str, list[float]]] = {small: {}, large: {}}
        for scale in (small, large):  # warm up
            for op in ops[scale].values():
                await latencies(op, 30)
        # Many short alternating rounds, so a burst of load from elsewhere on the shared
        # machine lands on both histories alike instead of on one block of one of them.
        rounds = 12
        for _ in range(rounds):
            for name in ops[small]:
                for scale in (small, large):
                    results[scale].setdefault(name, [])
                    results[scale][name] += await latencies(ops[scale][name], count // rounds)
    scenario = f"history growth, {large.label()} vs {small.label()}"
    for name in results[small]:
        for pct in (50, 99):
            big, base = percentile(results[large][name], pct), percentile(results[small][name], pct)
            flat = pct == 50
            report.add(
                Row(
                    scenario,
                    f"{name}, p{pct}, at {large.label()}",
                    big,
                    "ms",
                    f"at {small.label()}",
                    base,
                    "≤ 1.25 x" if flat else "",
                    (big <= 1.25 * base) if flat else None,
                )
            )
    report.notes.append(
        f"History growth: {small.label()} ({small.exchanges * 2} messages per conversation) "
        f"and {large.label()} ({large.exchanges * 2} per conversation), bulk-loaded "
        f"({loaded[large]:.0f} s for the large history on this machine) into two databases "
        "of one PostgreSQL server, each served by its own messaging process; VACUUM ANALYZE "
        "and CHECKPOINT after each load. Operations run one at a time, "
        f"{count} of each per history, in alternating rounds, on random loaded "
        f"conversations; a read asks for {PAGE} answers from a random cursor."
    )


async def start_scheduler(procs: Processes, messaging: str) -> SchedulerRunning:
    """The scheduler, in this process so its tick counter can be read; a short tick."""
    config = SchedulerConfig.from_env(
        {
            "SCHEDULER_DATABASE_URL": procs.database_url,
            "SCHEDULER_LISTEN": f"127.0.0.1:{free_port()}",
            "SCHEDULER_MESSAGING_ADDRESS": messaging,
            "SCHEDULER_TICK_SECONDS": str(TICK_SECONDS),
            **procs.keys.env("service:scheduler"),
            "SCHEDULER_WEBHOOK_KEY": "bench-webhook-key",
            **{k: v for k, v in os.environ.items() if k == "SCHEDULER_BATCH_SIZE"},
        }
    )
    return await start_scheduler_service(config)


def add_due_timers(database_url: str, count: int) -> None:
    """`count` wake-ups due a second ago, one per fresh conversation, in one transaction."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute(
            """
            CREATE TEMP TABLE load_conv ON COMMIT DROP AS
            SELECT gen_random_uuid() AS cid, gen_random_uuid() AS iid
            FROM generate_series(1, %s)
            """,
            (count,),
        )
        conn.execute(
            """
            INSERT INTO messaging.conversations
                (id, target_kind, target_name, started_by, last_position)
            SELECT cid, 'crew', %s, %s, 0 FROM load_conv
            """,
            (TARGET_NAME, USER),
        )
        conn.execute(
            "INSERT INTO messaging.inboxes (id, conversation_id, principal) "
            "SELECT iid, cid, %s FROM load_conv",
            (USER,),
        )
        conn.execute(
            """
            INSERT INTO scheduler.wake_ups
                (id, conversation_id, product, note, due_at, created_by)
            SELECT gen_random_uuid(), cid, %s, 'check on the ticket', now() - interval '1 s', %s
            FROM load_conv
            """,
            (TARGET, AGENT),
        )


def pending_timers(database_url: str) -> bool:
    """Whether any wake-up is still pending (one index probe, so polling costs little)."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        return conn.execute(
            "SELECT EXISTS (SELECT 1 FROM scheduler.wake_ups WHERE status = 'pending')"
        ).fetchone()[0]


class TickCounter:
    """Counts the scheduler's ticks that fired something (its tick loop calls tick())."""

    def __init__(self, scheduler: SchedulerRunning) -> None:
        assert scheduler.service is not None
        self.service = scheduler.service
        self.firing = 0
        tick = self.service.tick

        async def counted() -> int:
            fired = await tick()
            if fired:
                self.firing += 1
            return fired

        self.service.tick = counted  # type: ignore[method-assign]


async def drain(database_url: str, count: int, ticks: TickCounter) -> tuple[float, int]:
    """Seconds until `count` new due timers have all fired, and the ticks that fired them."""
    before = ticks.firing
    await asyncio.to_thread(add_due_timers, database_url, count)
    started = time.perf_counter()
    while True:
        if not await asyncio.to_thread(pending_timers, database_url):
            break
        await asyncio.sleep(0.2)
    seconds = time.perf_counter() - started
    await ticks.service.wait_ticks(2, timeout=60)  # the tick that fired the last ones ended
    return seconds, ticks.firing - before


async def timer_drain(procs: Processes, report: Report, small: int, large: int) -> None:
    """Time for the scheduler to fire `large` due timers, against `small` of them."""
    messaging = procs.start("agentworks_messaging", "MESSAGING")
    async with MessagingClient(
        messaging, identity=Minter("user:ops", procs.key, roles={"operator"})
    ) as ops:
        await ops.register_target(TARGET, owner="user:ops")
    scheduler = await start_scheduler(procs, messaging)
    ticks = TickCounter(scheduler)
    try:
        await drain(procs.database_url, 100, ticks)  # warm up
        small_seconds, small_ticks = await drain(procs.database_url, small, ticks)
        large_seconds, large_ticks = await drain(procs.database_url, large, ticks)
    finally:
        await scheduler.stop(5)
    with psycopg.connect(libpq_url(procs.database_url), autocommit=True) as conn:
        fired, delivered = conn.execute(
            """
            SELECT (SELECT count(*) FROM scheduler.wake_ups WHERE status = 'fired'),
                   (SELECT count(*) FROM messaging.deliveries WHERE kind = 'wake_up')
            """
        ).fetchone()
    total = 100 + small + large
    scenario = f"timer firing, {_power(large)} due wake-ups, tick {TICK_SECONDS} s"
    report.add(
        Row(
            scenario,
            f"fired per second draining {_power(large)}",
            large / large_seconds,
            "timers/s",
            f"draining {_power(small)}",
            small / small_seconds,
        )
    )
    report.add(Row(scenario, f"time to drain {_power(large)}", large_seconds, "s"))
    report.add(
        Row(
            scenario,
            f"scheduler ticks that fired some of the {_power(large)}",
            float(large_ticks),
            "ticks",
            f"draining {_power(small)}",
            float(small_ticks),
        )
    )
    report.notes.append(
        f"Timer firing: wake-ups due a second ago are inserted straight into the "
        f"scheduler's table, one per conversation (conversations bulk-loaded into "
        f"messaging); the scheduler (defaults: batches of 100, each sent to messaging as one "
        f"EnqueueDeliveries request; tick {TICK_SECONDS} s) runs in the benchmark process so "
        "that its tick counter can be read, messaging in its own. Drain time runs from the "
        "insert's commit until no wake-up is pending. `SCHEDULER_BATCH_SIZE=500 python -m "
        "bench --only 'timer drain'` measures another batch size."
    )
    report.add(
        Row(
            scenario,
            "wake-ups fired / deliveries queued (exactly once)",
            float(delivered),
            "deliveries",
            "wake-ups fired",
            float(fired),
            f"= {total}",
            fired == delivered == total,
        )
    )
