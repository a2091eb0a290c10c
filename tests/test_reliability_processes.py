"""Process faults under a steady mixed load: functions, the scheduler and an agent runtime
are SIGKILLed at seeded random points and restarted (C4, C10, C11, F5, F6, F12, S6, P3).

The load: senders send and read messages (messaging stays up; it has its own kill test),
callers call a function with retry keys and read statuses, an agent asks for wake-ups,
and a schedule fires every second. The runtime process claims the function executions
and the conversation turns and logs each claim to a file before acting on it (one file
per incarnation), so the test knows what a killed runtime was holding.

Afterwards, with everything quiet: every acknowledged message is stored exactly once and
readable, and none is stored without a receipt; every acknowledged call exists once and
tells the truth — finished ones `completed` and readable, lost ones `interrupted`, none
claimed twice (never silently restarted), none left open; every wake-up fired exactly
once and every schedule occurrence was delivered exactly once (counted by idempotency
key in messaging); every delivery was handed to at most one turn, and lost turns are
`interrupted`, not resent.

`make test` runs a bounded version (five kills, well under 60 s). `make soak` sets
`AGENTWORKS_SOAK_SECONDS` and kills for that long. `AGENTWORKS_FAULT_SEED` (default 7)
chooses the victims and the moments.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import psycopg
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.functions import state_name
from agentworks.core.errors import Busy, DeadlineExceeded, Unavailable

SOAK_SECONDS = float(os.environ.get("AGENTWORKS_SOAK_SECONDS") or 0)
SEED = int(os.environ.get("AGENTWORKS_FAULT_SEED") or 7)
RETRYABLE = (Unavailable, DeadlineExceeded)
LEASE = 4  # execution lease of the runtime, seconds (functions allows 1+ here)
TARGET = "crew:load"
WORKER = "agent:load/worker"

pytestmark = pytest.mark.timeout(int(max(150, SOAK_SECONDS * 3 + 150)))

# The runtime process: claims executions and turns of crew:load and logs every claim
# before it acts on it. A killed incarnation leaves its log behind.
RUNTIME = r"""
import asyncio, os, random, sys, time
from agentworks.core import errors
from agentworks.client import FunctionsClient, MessagingClient
from agentworks.core.identity import Minter
from agentworks.core.keys import signing_key_from_env
from agentworks.client.functions import state_name

KEY = signing_key_from_env()
LOG = open(os.environ["RUNTIME_LOG"], "a", buffering=1)  # a line reaches the file at once
rng = random.Random(os.environ["RUNTIME_SEED"])
LEASE = int(os.environ["RUNTIME_LEASE"])
TARGET, PRINCIPAL = os.environ["RUNTIME_TARGET"], os.environ["RUNTIME_PRINCIPAL"]
TRANSIENT = (errors.Unavailable, errors.DeadlineExceeded)
LOST = (errors.PreconditionFailed, errors.NotFound)


def note(*words):
    LOG.write(" ".join(words) + "\n")


async def retry(make):
    while True:
        try:
            return await make()
        except TRANSIENT:
            await asyncio.sleep(0.1)


async def beat(fn, call_id):
    while True:
        await asyncio.sleep(LEASE / 4)
        try:
            await fn.heartbeat_execution(call_id, lease_seconds=LEASE)
        except errors.AgentWorksError:
            pass  # lost (the finish will say so) or transient (the next beat retries)


async def execution(fn, ex):
    call_id = ex.call_id
    note("claim", call_id)
    beating = asyncio.create_task(beat(fn, call_id))
    try:
        await retry(lambda: fn.report(call_id, messages=["working"], sequence=1))
        await asyncio.sleep(rng.uniform(0.05, 0.5))
        done = await retry(lambda: fn.finish_execution(call_id, final_message="done " + call_id))
        note("finish", call_id, state_name(done.status))
    except LOST:
        note("lost", call_id)
    finally:
        beating.cancel()


async def executions():
    me = Minter(PRINCIPAL, KEY)
    fn = FunctionsClient(os.environ["FUNCTIONS_ADDRESS"], identity=me, timeout=5)
    while True:
        try:
            ex = await fn.claim_execution([TARGET], wait_seconds=2, lease_seconds=LEASE)
        except TRANSIENT:
            await asyncio.sleep(0.1)
            continue
        if ex is not None:
            await execution(fn, ex)


async def turns():
    me = Minter(PRINCIPAL, KEY)
    ms = MessagingClient(os.environ["MESSAGING_ADDRESS"], identity=me, timeout=5)
    while True:
        try:
            turn = await ms.claim_turn([TARGET], wait_seconds=2, lease_seconds=5)
        except TRANSIENT:
            await asyncio.sleep(0.1)
            continue
        if turn is None:
            continue
        note("turn", turn.turn_id, *[d.delivery_id for d in turn.deliveries])
        try:
            # A turn's work: short, so the backlog the senders leave drains in seconds
            # (0-0.2 s took 45 s of the run), long enough that kills land mid-turn.
            await asyncio.sleep(rng.uniform(0, 0.04))
            await retry(lambda: ms.send_message(
                turn.reply_inbox_id, "re " + turn.turn_id, submission_id=turn.turn_id))
            await retry(lambda: ms.complete_turn(turn.turn_id))
            note("done", turn.turn_id)
        except LOST:
            note("turn-lost", turn.turn_id)


async def main():
    note("start")
    await asyncio.gather(*[executions() for _ in range(3)], *[turns() for _ in range(2)])


asyncio.run(main())
"""


class Runtime:
    """The runtime as a process of its own; every incarnation logs to its own file."""

    def __init__(self, folder: pathlib.Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.incarnation = -1
        self.process: subprocess.Popen[bytes] | None = None

    def log(self, incarnation: int) -> pathlib.Path:
        return self.folder / f"runtime-{incarnation}.log"

    def start(self) -> None:
        self.incarnation += 1
        env = {
            **self.env,
            "RUNTIME_LOG": str(self.log(self.incarnation)),
            "RUNTIME_SEED": f"{SEED}-{self.incarnation}",
        }
        self.process = subprocess.Popen([sys.executable, "-c", RUNTIME], env=env)

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def entries(self) -> list[tuple[int, list[str]]]:
        """(incarnation, words) of every log line of every incarnation."""
        out = []
        for incarnation in range(self.incarnation + 1):
            path = self.log(incarnation)
            if path.exists():
                out += [(incarnation, line.split()) for line in path.read_text().splitlines()]
        return out


@dataclass
class Ledger:
    """What the clients were told (receipts), and what they could not know."""

    messages: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (msg, conv)
    inboxes: dict[str, str] = field(default_factory=dict)  # inbox -> principal
    calls: dict[str, str] = field(default_factory=dict)  # caller/key -> call_id
    refused: set[str] = field(default_factory=set)  # caller/key refused busy, given up
    wake_ups: set[str] = field(default_factory=set)
    reads: int = 0
    kills: list[str] = field(default_factory=list)


async def retrying(make, stop_at: float):
    """What a careful client does: retry UNAVAILABLE / deadlines with the same request."""
    while True:
        try:
            return await make()
        except RETRYABLE:
            assert time.monotonic() < stop_at, "a service stayed unavailable"
            await asyncio.sleep(0.05)


async def until_drained(open_work, describe, *, stall: float = 60.0) -> None:
    """Poll every 0.2 s until `open_work()` counts nothing open. A long soak leaves a
    backlog that takes a while to drain (senders outpace the one agent runtime); what
    fails is work that stops draining: no fall in the count for `stall` seconds."""
    least, since = None, time.monotonic()
    while left := await asyncio.to_thread(open_work):
        if least is None or left < least:
            least, since = left, time.monotonic()
        assert time.monotonic() - since < stall, f"nothing drained for {stall} s: {describe()}"
        await asyncio.sleep(0.2)


def kill_plan(rng: random.Random) -> list[tuple[str, float]]:
    """(victim, pause before the kill): each victim at least once, in a seeded order."""
    victims = ["functions", "scheduler", "runtime", "functions", "scheduler"]
    rng.shuffle(victims)
    return [(victim, rng.uniform(0.3, 1.5)) for victim in victims]


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process faults under mixed load (C4, C10, C11, F5, F6, F12, S6, P3)",
    action="SIGKILL at seeded random moments (functions, scheduler, runtime; at least one "
    "each, 5 kills; soak: for AGENTWORKS_SOAK_SECONDS) and restart, while senders send and "
    "read, callers call with retry keys and read statuses, an agent creates wake-ups with "
    "retry keys (retried through the kills), a schedule fires every second, and the "
    "runtime claims executions and turns",
    check="acknowledged messages stored once and readable, none without a receipt; calls "
    "stored once, none without a receipt or after a busy refusal, completed ones readable "
    "with their answer, lost ones interrupted, none claimed twice, none open; one "
    "wake-up per acknowledged create, none extra; every wake-up and schedule occurrence "
    "delivered exactly once by idempotency key; every delivery in at most one turn, lost "
    "turns interrupted",
)
async def test_kill_9_under_mixed_load_loses_duplicates_and_restarts_nothing(
    database_url, messaging, service_process, identity, signing_keys, tmp_path
):
    """C4 C10 C11 F5 F6 F12 S1 S6 P3: see the module docstring."""
    rng = random.Random(SEED)
    functions, scheduler = await asyncio.gather(
        asyncio.to_thread(
            service_process,
            "agentworks_functions",
            "FUNCTIONS",
            database_url,
            FUNCTIONS_SWEEP_SECONDS="0.2",
            FUNCTIONS_MIN_LEASE_SECONDS="1",
            FUNCTIONS_NOTICE_RETRY_SECONDS="0.2",
            FUNCTIONS_MESSAGING_ADDRESS=messaging.address,
        ),
        asyncio.to_thread(
            service_process,
            "agentworks_scheduler",
            "SCHEDULER",
            database_url,
            SCHEDULER_MESSAGING_ADDRESS=messaging.address,
            SCHEDULER_TICK_SECONDS="0.2",
            SCHEDULER_MIN_INTERVAL_SECONDS="1",
            SCHEDULER_DELIVERY_TIMEOUT_SECONDS="2",
        ),
    )
    runtime = Runtime(
        tmp_path,
        {
            **os.environ,
            **signing_keys.env("gateway"),
            "FUNCTIONS_ADDRESS": functions.address,
            "MESSAGING_ADDRESS": messaging.address,
            "RUNTIME_LEASE": str(LEASE),
            "RUNTIME_TARGET": TARGET,
            "RUNTIME_PRINCIPAL": WORKER,
            "LOG_LEVEL": "warning",
        },
    )
    opened: list[MessagingClient | FunctionsClient | SchedulerClient] = []

    def client(cls, address: str, principal: str, roles=frozenset()):
        made = cls(address, identity=identity(principal, roles), timeout=5)
        opened.append(made)
        return made

    ops_m = client(MessagingClient, messaging.address, "user:ops", {"operator"})
    ops_f = client(FunctionsClient, functions.address, "user:ops", {"operator"})
    owner = client(FunctionsClient, functions.address, "user:owner")
    timer = client(SchedulerClient, scheduler.address, "agent:load/timer")
    await ops_m.register_target(TARGET, owner="user:owner")
    await ops_f.register_target(TARGET, owner="user:owner", running_limit=6)
    await owner.declare_function(
        TARGET,
        "work",
        input_schema={"type": "object", "additionalProperties": True},
        allowed_callers=["user:*"],
    )
    first = await client(MessagingClient, messaging.address, "user:s9").send("hi", target=TARGET)
    schedule = await timer.create_schedule(first.conversation_id, "tick", interval_seconds=1)
    runtime.start()

    try:
        ledger = Ledger()
        conversations = [first.conversation_id]
        stop = asyncio.Event()
        hard_stop = time.monotonic() + max(120, SOAK_SECONDS * 2 + 90)

        async def sender(n: int) -> None:
            principal = f"user:s{n}"
            me = client(MessagingClient, messaging.address, principal)
            mine = random.Random(f"{SEED}-s{n}")
            inbox, i = "", 0
            while not stop.is_set():
                key = f"s{n}-{i}"
                receipt = await retrying(
                    lambda key=key, inbox=inbox: me.send(
                        f"payload {key}",
                        target=None if inbox else TARGET,
                        inbox_id=inbox or None,
                        submission_id=key,
                    ),
                    hard_stop,
                )
                ledger.messages[f"{principal}/{key}"] = (
                    receipt.message_id,
                    receipt.conversation_id,
                )
                ledger.inboxes[receipt.inbox_id] = principal
                if not inbox:
                    conversations.append(receipt.conversation_id)
                inbox = "" if mine.random() < 0.25 else receipt.inbox_id
                await me.read(receipt.inbox_id)
                ledger.reads += 1
                i += 1

        async def caller(n: int) -> None:
            principal = f"user:c{n}"
            me = client(FunctionsClient, functions.address, principal)
            i = 0
            while not stop.is_set():
                key = f"c{n}-{i}"
                while True:
                    try:
                        receipt = await retrying(
                            lambda key=key: me.call(TARGET, "work", {"k": key}, submission_id=key),
                            hard_stop,
                        )
                        ledger.calls[f"{principal}/{key}"] = receipt.call_id
                        break
                    except Busy:
                        if stop.is_set():
                            ledger.refused.add(f"{principal}/{key}")
                            break
                        await asyncio.sleep(0.1)  # the documented answer to busy: retry later
                earlier = [c for k, c in ledger.calls.items() if k.startswith(principal)]
                if earlier:
                    status = await retrying(lambda c=earlier[-1]: me.get_status(c), hard_stop)
                    assert state_name(status.status) in ("running", "completed", "interrupted"), (
                        state_name(status.status)
                    )
                    ledger.reads += 1
                i += 1

        async def waker() -> None:
            mine = random.Random(f"{SEED}-w")
            n = 0
            while not stop.is_set():
                conversation = mine.choice(conversations)
                delay = mine.randint(0, 1)
                key = f"w{n}"
                # Retried with the same key through the scheduler's kills: one wake-up.
                w = await retrying(
                    lambda c=conversation, d=delay, k=key: timer.create_wake_up(
                        c, delay_seconds=d, submission_id=k
                    ),
                    hard_stop,
                )
                ledger.wake_ups.add(w.wake_up_id)
                n += 1
                await asyncio.sleep(0.05)

        load = [asyncio.create_task(sender(n)) for n in range(2)]
        load += [asyncio.create_task(caller(n)) for n in range(2)]
        load.append(asyncio.create_task(waker()))
        victims = {"functions": functions, "scheduler": scheduler, "runtime": runtime}
        started = time.monotonic()
        try:
            plan = kill_plan(rng)
            while plan or (SOAK_SECONDS and time.monotonic() - started < SOAK_SECONDS):
                victim, pause = (
                    plan.pop(0) if plan else (rng.choice(list(victims)), rng.uniform(0.3, 3))
                )
                await asyncio.sleep(pause)  # a seeded random moment under load, not a wait
                victims[victim].kill()
                ledger.kills.append(victim)
                await asyncio.to_thread(victims[victim].start)
            await asyncio.sleep(1.0)  # one more second of load with everything up
        finally:
            stop.set()
            results = await asyncio.gather(*load, return_exceptions=True)
        errors_seen = [r for r in results if isinstance(r, BaseException)]
        assert not errors_seen, errors_seen

        # Paused, not deleted: its fire_count is compared with the deliveries.
        await retrying(lambda: timer.pause_schedule(schedule.schedule_id), hard_stop)
        with psycopg.connect(database_url, autocommit=True) as conn:
            still_open: dict[str, int] = {}

            def open_work() -> int:
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM functions.calls WHERE status IN "
                    "('running', 'waiting_for_input')), (SELECT count(*) FROM scheduler.wake_ups "
                    "WHERE status = 'pending'), (SELECT count(*) FROM messaging.turns WHERE "
                    "status = 'active'), (SELECT count(*) FROM messaging.deliveries WHERE "
                    "status IN ('pending', 'in_turn'))"
                ).fetchone()
                assert row is not None
                still_open.update(
                    zip(("calls", "wake-ups", "turns", "deliveries"), row, strict=True)
                )
                return sum(row)

            def describe() -> str:
                rows = conn.execute(
                    "(SELECT 'call', id::text, status, coalesce(runtime, '') "
                    "FROM functions.calls WHERE status IN ('running', 'waiting_for_input') "
                    "LIMIT 5) UNION ALL (SELECT 'turn', id::text, status, runtime "
                    "FROM messaging.turns WHERE status = 'active' LIMIT 5) UNION ALL "
                    "(SELECT 'delivery', id::text, status, kind FROM messaging.deliveries "
                    "WHERE status IN ('pending', 'in_turn') LIMIT 5)"
                ).fetchall()
                return f"still open: {still_open}; first of them: {rows}"

            await until_drained(open_work, describe)
            runtime.kill()
            snapshot = read_database(conn, schedule.schedule_id)

        statuses = Counter(status for _, _, status, *_ in snapshot["calls"])
        print(
            f"seed {SEED}: kills {ledger.kills}; {len(ledger.messages)} messages, {ledger.reads} "
            f"reads, calls {dict(statuses)}, {len(ledger.refused)} refused busy, "
            f"{len(snapshot['wake_ups'])} wake-ups, {snapshot['fire_count'][0][0]} schedule "
            "occurrences, "
            f"turns {dict(Counter(snapshot['turns'].values()))}"
        )
        assert len(ledger.messages) > 20 and len(ledger.calls) > 10, "the load was too light"
        assert set(ledger.kills) == set(victims)
        await check_messages(ledger, snapshot, client, messaging.address)
        await check_calls(ledger, snapshot, runtime, client, functions.address)
        check_timers(ledger, snapshot)
        check_turns(snapshot, runtime)
    finally:
        runtime.kill()
        for made in opened:
            with contextlib.suppress(Exception):
                await made.close()


# ----------------------------------------------------------------------------- checks


def read_database(conn: psycopg.Connection, schedule_id: str) -> dict:
    def rows(query: str, *params) -> list[tuple]:
        return conn.execute(query, params).fetchall()

    return {
        "messages": rows(
            "SELECT s.principal || '/' || s.submission_id, m.id::text, m.conversation_id::text "
            "FROM messaging.submissions s JOIN messaging.messages m ON m.id = s.message_id "
            "WHERE m.direction = 'to_target'"
        ),
        "to_target": rows(
            "SELECT count(*) FROM messaging.messages WHERE direction = 'to_target' "
            "AND sender LIKE 'user:s%%'"
        )[0][0],
        "replies": rows(
            "SELECT inbox_id::text, id::text FROM messaging.messages WHERE direction = 'to_inbox'"
        ),
        "calls": rows(
            "SELECT id::text, caller || '/' || submission_key, status, answer, error, "
            "runtime IS NOT NULL FROM functions.calls"
        ),
        "wake_ups": dict(rows("SELECT id::text, status FROM scheduler.wake_ups")),
        "deliveries": rows(
            "SELECT id::text, kind, idempotency_key, status, turn_id::text "
            "FROM messaging.deliveries"
        ),
        "turns": dict(rows("SELECT id::text, status FROM messaging.turns")),
        "fire_count": rows("SELECT fire_count FROM scheduler.schedules WHERE id = %s", schedule_id),
        "schedule_id": schedule_id,
    }


async def check_messages(ledger: Ledger, db: dict, client, address: str) -> None:
    """C4 C5: each acknowledged message once, none without a receipt, all readable."""
    stored = {key: (mid, conv) for key, mid, conv in db["messages"]}
    senders = {k: v for k, v in stored.items() if k.startswith("user:s") and "/s" in k}
    assert senders == ledger.messages
    assert db["to_target"] == len(ledger.messages) + 1  # + the schedule's opening message
    by_conversation: dict[tuple[str, str], set[str]] = defaultdict(set)
    for key, (message_id, conversation) in ledger.messages.items():
        by_conversation[(key.split("/")[0], conversation)].add(message_id)
    for (principal, conversation), wanted in by_conversation.items():
        reader = client(MessagingClient, address, principal)
        seen, after = set(), ""
        while True:
            page = await reader.get_transcript(conversation, after=after, limit=200)
            seen |= {e.message.message_id for e in page.entries if e.HasField("message")}
            if not page.entries:
                break
            after = page.next_cursor
        assert wanted <= seen, f"acknowledged messages not readable in {conversation}"
    replies: dict[str, set[str]] = defaultdict(set)
    for inbox, message_id in db["replies"]:
        replies[inbox].add(message_id)
    for inbox, principal in ledger.inboxes.items():
        reader = client(MessagingClient, address, principal)
        seen, after = set(), ""
        while True:
            page = await reader.read(inbox, after=after, limit=100)
            if not page.messages:
                break
            seen |= {m.message_id for m in page.messages}
            after = page.next_cursor
        assert seen == replies.get(inbox, set()), f"replies to {inbox} not all readable"


async def check_calls(ledger: Ledger, db: dict, runtime: Runtime, client, address: str) -> None:
    """F5 F6 F12: each acknowledged call once, truthful, never claimed twice."""
    by_key = {key: call_id for call_id, key, *_ in db["calls"] if key and key.startswith("user:c")}
    assert by_key == ledger.calls
    assert not (ledger.refused & set(by_key)), "a call refused busy was stored"
    final = {
        call_id: (status, answer, error) for call_id, _, status, answer, error, _ in db["calls"]
    }
    killed = set(range(runtime.incarnation))  # every incarnation but the last was killed
    claims: Counter[str] = Counter()
    finished: dict[str, str] = {}
    lost: set[str] = set()
    claimed_by: dict[str, int] = {}
    for incarnation, words in runtime.entries():
        if words[0] == "claim":
            claims[words[1]] += 1
            claimed_by[words[1]] = incarnation
        elif words[0] == "finish":
            finished[words[1]] = words[2]
        elif words[0] == "lost":
            lost.add(words[1])
    twice = [c for c, n in claims.items() if n > 1]
    assert not twice, f"executions claimed twice (silently restarted): {twice}"
    for call_id, (status, answer, error) in final.items():
        assert status in ("completed", "interrupted"), f"{call_id} ended {status}"
        if status == "completed":
            assert answer == f"done {call_id}"
            assert call_id in claims, "completed without a logged claim"
        else:
            assert "lease" in error
            # Interrupted: its runtime was killed, lost the lease while functions was
            # down, or never learned of its claim (the reply was cut by a kill).
            assert finished.get(call_id) != "completed"
            assert call_id in lost or claimed_by.get(call_id) in killed or call_id not in claims
    for call_id, status in finished.items():
        assert final[call_id][0] == status
    readers = {key.split("/")[0] for key in ledger.calls}
    for principal in readers:
        reader = client(FunctionsClient, address, principal)
        for key, call_id in ledger.calls.items():
            if key.startswith(principal + "/"):
                status = await reader.get_status(call_id)
                assert (state_name(status.status), status.answer) == final[call_id][:2]


def check_timers(ledger: Ledger, db: dict) -> None:
    """S6: every wake-up and schedule occurrence delivered exactly once."""
    wake_ups = db["wake_ups"]
    assert ledger.wake_ups <= set(wake_ups)
    assert len(wake_ups) == len(ledger.wake_ups)  # retried creates made no twins
    assert set(wake_ups.values()) == {"fired"}
    per_wake_up = Counter(
        key.split(":")[1] for _, kind, key, *_ in db["deliveries"] if kind == "wake_up"
    )
    assert per_wake_up == dict.fromkeys(wake_ups, 1)
    occurrences = [key for _, kind, key, *_ in db["deliveries"] if kind == "schedule"]
    assert all(key.startswith(f"schedule:{db['schedule_id']}:") for key in occurrences)
    assert [(len(occurrences),)] == db["fire_count"], "schedule occurrences lost or doubled"


def check_turns(db: dict, runtime: Runtime) -> None:
    """C10 C11: every delivery handed out in at most one turn; lost turns interrupted."""
    handed: Counter[str] = Counter()
    turn_of: dict[str, int] = {}
    done: set[str] = set()
    for incarnation, words in runtime.entries():
        if words[0] == "turn":
            turn_of[words[1]] = incarnation
            handed.update(words[2:])
        elif words[0] == "done":
            done.add(words[1])
    twice = [d for d, n in handed.items() if n > 1]
    assert not twice, f"deliveries handed out twice: {twice}"
    for delivery_id, _kind, _key, status, turn_id in db["deliveries"]:
        assert status in ("handled", "interrupted"), (delivery_id, status)
        if status == "interrupted":
            assert db["turns"][turn_id] == "interrupted"
    for turn_id in done:
        assert db["turns"][turn_id] == "completed"
    for turn_id, status in db["turns"].items():
        if status == "interrupted":
            assert turn_id not in done
