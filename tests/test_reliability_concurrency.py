"""Randomized concurrency with several replicas of each service (C4, C10, F5, F6, S6, P3).

Hypothesis draws small plans (derandomized: the same plans on every run, shrunk when one
fails); each plan runs its operations at once, spread over the replicas, and the
invariants are checked against the responses and the database. Each example isolates
itself by unique names instead of resetting the database.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2 as m

pytestmark = pytest.mark.timeout(300)

EXAMPLES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}x{time.monotonic_ns() % 10**6}"


class Clients:
    """Clients per (service address, principal), closed at the end of the test."""

    def __init__(self, identity) -> None:
        self.identity = identity
        self.made: dict[tuple, Any] = {}

    def get(self, cls, address: str, principal: str, roles=frozenset()):
        key = (cls, address, principal)
        if key not in self.made:
            self.made[key] = cls(address, identity=self.identity(principal, roles), timeout=20)
        return self.made[key]

    async def close(self) -> None:
        for client in self.made.values():
            await client.close()


@pytest.fixture
async def clients(identity):
    made = Clients(identity)
    yield made
    await made.close()


# ----------------------------------------------------------------- functions (F5, F6)

call_plans = st.tuples(
    st.integers(1, 4),  # running limit
    st.lists(
        st.tuples(
            st.integers(0, 1),  # caller
            st.one_of(st.none(), st.integers(0, 4)),  # submission key (None: no key)
            st.integers(0, 2),  # replica
        ),
        min_size=2,
        max_size=14,
    ),
    st.integers(1, 3),  # runtimes claiming at once
)


@pytest.fixture
async def functions_replicas(start_functions):
    return [await start_functions() for _ in range(3)]


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Concurrency, functions on 3 replicas (F5, F6, P3)",
    action="hypothesis plans (derandomized, 15 examples): a running limit of 1-4 and up to "
    "14 concurrent calls by 2 callers with repeated or no submission_ids, spread over 3 "
    "replicas; then 1-3 runtimes on different replicas claim at once",
    check="exactly min(limit, distinct requests) calls accepted, the rest RESOURCE_EXHAUSTED "
    "with nothing stored; one call per (caller, key), a retry never busy when its call "
    "exists; the database holds exactly the accepted calls; every call claimed exactly once",
)
@settings(EXAMPLES, max_examples=15)
@given(plan=call_plans)
async def test_running_limit_and_dedup_hold_across_replicas_F5_F6_P3(
    functions_replicas, clients, database_url, plan
):
    """F5 F6 P3: see the reliability mark."""
    limit, operations, runtimes = plan
    crew = unique("fn")
    target = f"crew:{crew}"
    addresses = [r.address for r in functions_replicas]
    ops = clients.get(FunctionsClient, addresses[0], "user:ops", {"operator"})
    owner = clients.get(FunctionsClient, addresses[0], "user:owner")
    await ops.register_target(target, owner="user:owner", running_limit=limit)
    await owner.declare_function(
        target,
        "echo",
        input_schema={"type": "object", "additionalProperties": True},
        allowed_callers=["user:*"],
    )

    async def one(index: int, caller: int, key: int | None, replica: int):
        client = clients.get(FunctionsClient, addresses[replica], f"user:c{caller}")
        inputs = {"k": key} if key is not None else {"i": index}
        submission = f"{crew}-{key}" if key is not None else ""
        try:
            return await client.call(target, "echo", inputs, submission_id=submission)
        except errors.Busy as exc:
            assert f"running limit is {limit}" in exc.message
            return exc

    results = await asyncio.gather(*(one(i, *op) for i, op in enumerate(operations)))

    groups: dict[tuple, list] = defaultdict(list)
    for index, ((caller, key, _), result) in enumerate(zip(operations, results, strict=True)):
        groups[(caller, key) if key is not None else ("once", index)].append(result)
    accepted = set()
    for group in groups.values():
        receipts = [r for r in group if not isinstance(r, errors.Busy)]
        assert len(receipts) in (0, len(group)), "a retry was refused busy though its call exists"
        assert len({r.call_id for r in receipts}) <= 1, "one retry key made two calls"
        accepted |= {r.call_id for r in receipts}
    assert len(accepted) == min(limit, len(groups))
    with psycopg.connect(database_url) as conn:
        stored = {
            str(row[0])
            for row in conn.execute(
                "SELECT id FROM functions.calls WHERE target_name = %s", (crew,)
            ).fetchall()
        }
    assert stored == accepted

    claimed: list[str] = []

    async def runtime(n: int) -> None:
        client = clients.get(FunctionsClient, addresses[n % 3], f"agent:{crew}/r{n}")
        while (execution := await client.claim_execution([target])) is not None:
            claimed.append(execution.call_id)

    await asyncio.gather(*(runtime(n) for n in range(runtimes)))
    assert sorted(claimed) == sorted(accepted)  # each exactly once


# --------------------------------------------------------------- messaging turns (C10)

turn_plans = st.tuples(
    st.integers(1, 3),  # conversations
    st.lists(
        st.tuples(st.sampled_from(["message", "timer"]), st.integers(0, 2), st.integers(0, 1)),
        min_size=1,
        max_size=12,
    ),  # (kind, conversation, replica)
    st.integers(1, 3),  # runtimes
)


@pytest.fixture
async def messaging_replicas(start_messaging):
    return [await start_messaging() for _ in range(2)]


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Concurrency, turn serialization on 2 messaging replicas (C10, C4, P3)",
    action="hypothesis plans (derandomized, 8 examples): messages and timer deliveries "
    "arrive at once in 1-3 conversations over 2 replicas while 1-3 runtimes on both "
    "replicas claim and complete turns",
    check="no two turns of one conversation overlap (each turn ends before the next of "
    "its conversation starts); every delivery is handed out in exactly one turn; nothing "
    "is left pending",
)
@settings(EXAMPLES, max_examples=8)
@given(plan=turn_plans)
async def test_one_turn_per_conversation_across_replicas_C10_P3(messaging_replicas, clients, plan):
    """C10 P3: see the reliability mark."""
    conversations, events, runtimes = plan
    crew = unique("tq")
    target = f"crew:{crew}"
    addresses = [r.address for r in messaging_replicas]
    ops = clients.get(MessagingClient, addresses[0], "user:ops", {"operator"})
    await ops.register_target(target, owner="user:owner")
    alice = [clients.get(MessagingClient, a, "user:alice") for a in addresses]
    timers = [clients.get(MessagingClient, a, "service:scheduler") for a in addresses]
    opened = [await alice[0].send(f"open {i}", target=target) for i in range(conversations)]
    expected = conversations + len(events)

    async def deliver(index: int, kind: str, conversation: int, replica: int) -> None:
        receipt = opened[conversation % conversations]
        if kind == "message":
            await alice[replica].send(f"m{index}", inbox_id=receipt.inbox_id)
        else:
            await timers[replica].enqueue_delivery(
                receipt.conversation_id,
                kind=m.DELIVERY_KIND_WAKE_UP,
                idempotency_key=f"{crew}:{index}",
                text=f"t{index}",
            )

    turns: list[tuple[str, float, float, list[str]]] = []
    handed = 0
    done = asyncio.Event()

    async def runtime(n: int) -> None:
        nonlocal handed
        client = clients.get(MessagingClient, addresses[n % 2], f"agent:{crew}/r{n}")
        deadline = time.monotonic() + 30
        while not done.is_set():
            assert time.monotonic() < deadline, f"only {handed} of {expected} deliveries handed"
            turn = await client.claim_turn([target], wait_seconds=1)
            if turn is None:
                continue
            started = time.monotonic()
            ids = [d.delivery_id for d in turn.deliveries]
            await asyncio.sleep(0)  # let other workers try this conversation meanwhile
            ended = time.monotonic()
            await client.complete_turn(turn.turn_id)
            turns.append((turn.conversation_id, started, ended, ids))
            handed += len(ids)
            if handed >= expected:
                done.set()

    workers = [asyncio.create_task(runtime(n)) for n in range(runtimes)]
    await asyncio.gather(*(deliver(i, *event) for i, event in enumerate(events)))
    await asyncio.gather(*workers)

    all_ids = [d for *_, ids in turns for d in ids]
    assert len(all_ids) == len(set(all_ids)) == expected
    by_conversation: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for conversation_id, started, ended, _ in turns:
        by_conversation[conversation_id].append((started, ended))
    for spans in by_conversation.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end < start, "two turns of one conversation overlapped"


# ------------------------------------------------------------------ scheduler (S6)

timer_plans = st.lists(
    st.tuples(
        st.integers(0, 1),  # delay in seconds
        st.sampled_from(["keep", "keep", "cancel", "reschedule"]),
        st.integers(0, 2),  # replica to act through
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture
async def timer_world(start_messaging, start_scheduler, identity):
    messaging = await start_messaging()
    replicas = [
        await start_scheduler(SCHEDULER_MESSAGING_ADDRESS=messaging.address) for _ in range(3)
    ]
    return messaging, replicas


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Concurrency, timer firing on 3 scheduler replicas (S6, S1, P3)",
    action="hypothesis plans (derandomized, 6 examples): up to 12 wake-ups due within 1 s, "
    "created, cancelled and rescheduled through 3 replicas that race to fire them",
    check="each wake-up ends fired with exactly one delivery (by idempotency key) or "
    "cancelled with none; a cancel or reschedule racing the firing either wins or is "
    "refused FAILED_PRECONDITION, never both; no replica ever sent a duplicate",
)
@settings(EXAMPLES, max_examples=6)
@given(plan=timer_plans)
async def test_each_timer_fires_exactly_once_across_replicas_S6_P3(
    timer_world, clients, database_url, plan
):
    """S6 S1 P3: see the reliability mark."""
    messaging, replicas = timer_world
    crew = unique("tm")
    ops = clients.get(MessagingClient, messaging.address, "user:ops", {"operator"})
    await ops.register_target(f"crew:{crew}", owner="user:owner")
    alice = clients.get(MessagingClient, messaging.address, "user:alice")
    conversation = (await alice.send("hi", target=f"crew:{crew}")).conversation_id
    bots = [clients.get(SchedulerClient, r.address, f"agent:{crew}/bot") for r in replicas]

    async def lifecycle(delay: int, action: str, replica: int) -> tuple[str, str]:
        bot = bots[replica]
        wake_up = await bot.create_wake_up(conversation, delay_seconds=delay)
        try:
            if action == "cancel":
                await bot.cancel_wake_up(wake_up.wake_up_id)
                return wake_up.wake_up_id, "cancelled"
            if action == "reschedule":
                await bot.reschedule_wake_up(wake_up.wake_up_id, delay_seconds=1 - delay)
        except errors.PreconditionFailed:
            return wake_up.wake_up_id, "fired"  # lost the race to the firing: it fired
        return wake_up.wake_up_id, "fired"

    outcomes = dict(await asyncio.gather(*(lifecycle(*p) for p in plan)))
    duplicates_before = sum(r.service.stats["duplicates"] for r in replicas)

    def counts() -> tuple[dict[str, str], dict[str, int]]:
        with psycopg.connect(database_url) as conn:
            statuses: dict[str, str] = dict(
                conn.execute(
                    "SELECT id::text, status FROM scheduler.wake_ups WHERE conversation_id = %s",
                    (conversation,),
                ).fetchall()
            )
            deliveries: dict[str, int] = dict(
                conn.execute(
                    "SELECT split_part(idempotency_key, ':', 2), count(*) "
                    "FROM messaging.deliveries WHERE conversation_id = %s AND kind = 'wake_up' "
                    "GROUP BY 1",
                    (conversation,),
                ).fetchall()
            )
        return statuses, deliveries

    deadline = time.monotonic() + 20
    while "pending" in (statuses := counts()[0]).values():
        assert time.monotonic() < deadline, "wake-ups still pending"
        await replicas[0].service.wait_ticks(1, timeout=5)
    statuses, deliveries = counts()
    assert statuses == outcomes
    assert deliveries == {w: 1 for w, outcome in outcomes.items() if outcome == "fired"}
    assert sum(r.service.stats["duplicates"] for r in replicas) == duplicates_before == 0
