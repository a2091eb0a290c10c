"""The runtime SDK against a real messaging service: turns, explicit replies, leases.

Covers R1 (runtimes claim turns, keep leases, send as their agent, finish), R2 (the
SDK and the demo crew), C6 (explicit replies only), C10 (turn queue), C11 (a lost
runtime's turn is interrupted and not resent), and S1/S2 (`TurnContext.wake_me` asks an
in-process scheduler for a wake-up that comes back as a later turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

from agentworks.client import MessagingClient, SchedulerClient
from agentworks.core.errors import PreconditionFailed, Unauthenticated, Unavailable
from agentworks.core.identity import Minter
from agentworks.core.keys import SigningKey
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, TurnOutcome, TurnWorker, delivery_attributes
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.serving import run_until_signal
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks.server.testing import read_until, service_env
from agentworks_dev.demo import handle_turn as demo_handle_turn
from agentworks_dev.demo import reminder_delay

CREW = "crew:demo"
AGENT = "agent:demo/demo-bot"
WAIT = 10  # seconds any single condition may take before the test fails
LEASE = 5  # the smallest lease ClaimTurn accepts


@pytest.fixture
async def clients(messaging, identity) -> AsyncIterator[dict[str, MessagingClient]]:
    """Clients for an operator, a user (alice) and the demo agent; crew:demo registered."""
    made = {
        "operator": MessagingClient(messaging.address, identity=identity("user:ops", {"operator"})),
        "alice": MessagingClient(messaging.address, identity=identity("user:alice")),
        "agent": MessagingClient(messaging.address, identity=identity(AGENT)),
    }
    await made["operator"].register_target(CREW, owner="user:dev")
    yield made
    for client in made.values():
        await client.close()


@pytest.fixture
async def scheduler(database_url, signing_keys, messaging):
    """The scheduler service in-process, delivering to `messaging`, ticking every 0.2 s."""
    from agentworks_scheduler.app import start
    from agentworks_scheduler.config import Config

    env = service_env(
        database_url,
        signing_keys,
        "SCHEDULER",
        SCHEDULER_MESSAGING_ADDRESS=messaging.address,
        SCHEDULER_TICK_SECONDS="0.2",
    )
    running = await start(Config.from_env(env))
    yield running
    await running.stop(0)


class Worker:
    """A TurnWorker running as a task, with its finished turns on a queue."""

    def __init__(
        self,
        address: str,
        minter: Minter,
        handler: Callable[[TurnContext], Awaitable[object]],
        scheduler_address: str | None = None,
    ):
        self.outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
        self.worker = TurnWorker(
            address,
            minter,
            [CREW],
            handler,
            scheduler_address=scheduler_address,
            wait_seconds=2,
            lease_seconds=LEASE,
            on_finished=self.outcomes.put_nowait,
        )
        self.task = asyncio.create_task(self.worker.run())

    async def next_outcome(self) -> TurnOutcome:
        return await asyncio.wait_for(self.outcomes.get(), WAIT)

    async def stop(self) -> None:
        self.worker.stop()
        await asyncio.wait_for(self.task, WAIT)

    async def kill(self) -> None:
        """Simulate the runtime process dying: no graceful stop, no CompleteTurn."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def read_all(client: MessagingClient, inbox_id: str) -> list[m.Message]:
    return list((await client.read(inbox_id, limit=100)).messages)


async def deliveries(client: MessagingClient, conversation_id: str) -> list[m.Delivery]:
    page = await client.get_transcript(conversation_id, limit=100)
    return [e.delivery for e in page.entries if e.WhichOneof("entry") == "delivery"]


async def test_worker_replies_explicitly_and_return_value_is_not_forwarded_c6_c10_r1(
    messaging, clients, identity
):
    """C6/C10/R1: a claimed turn's reply reaches the inbox; the handler's return value does not."""
    seen: list[TurnContext] = []

    async def handler(ctx: TurnContext) -> str:
        seen.append(ctx)
        for message in ctx.messages:
            await ctx.send_message(f"echo: {message.text}")
        return "FINAL CHAT TEXT THAT MUST NOT BE FORWARDED"

    worker = Worker(messaging.address, identity(AGENT), handler)
    try:
        receipt = await clients["alice"].send("hello", target=CREW)
        page = await clients["alice"].read(receipt.inbox_id, wait_seconds=WAIT)
        assert [msg.text for msg in page.messages] == ["echo: hello"]
        assert page.messages[0].sender == AGENT

        outcome = await worker.next_outcome()
        assert outcome.completed and not outcome.lease_lost and outcome.error is None
        ctx = seen[0]
        assert ctx.reply_inbox_id == receipt.inbox_id
        assert ctx.conversation_id == receipt.conversation_id
        assert ctx.target == CREW

        # After the turn completed, the inbox still holds only the explicit reply.
        assert [msg.text for msg in await read_all(clients["alice"], receipt.inbox_id)] == [
            "echo: hello"
        ]
        records = await deliveries(clients["alice"], receipt.conversation_id)
        assert [d.status for d in records] == [m.DELIVERY_STATUS_HANDLED]
    finally:
        await worker.stop()


async def test_demo_crew_replies_to_messages_and_acknowledges_other_deliveries_r2(
    messaging, clients, identity
):
    """R2/C10: the demo crew answers `demo heard: <text>` and checks back on a wake-up."""
    worker = Worker(messaging.address, identity(AGENT), demo_handle_turn)
    scheduler = MessagingClient(messaging.address, identity=identity("service:scheduler"))
    try:
        receipt = await clients["alice"].send("hi demo", target=CREW)
        page = await clients["alice"].read(receipt.inbox_id, wait_seconds=WAIT)
        assert [msg.text for msg in page.messages] == ["demo heard: hi demo"]
        await worker.next_outcome()

        await scheduler.enqueue_delivery(
            receipt.conversation_id,
            kind=m.DELIVERY_KIND_WAKE_UP,
            idempotency_key="wake-1",
            text="check the build",
        )
        page = await clients["alice"].read(
            receipt.inbox_id, after=page.next_cursor, wait_seconds=WAIT
        )
        assert [msg.text for msg in page.messages] == ["demo checking back: check the build"]

        # Without a scheduler the demo cannot set a reminder, and says so explicitly (C6).
        await clients["alice"].send("remind me in 5 s", inbox_id=receipt.inbox_id)
        page = await clients["alice"].read(
            receipt.inbox_id, after=page.next_cursor, wait_seconds=WAIT
        )
        assert len(page.messages) == 1
        assert page.messages[0].text.startswith("demo heard: remind me in 5 s (but cannot set")
    finally:
        await scheduler.close()
        await worker.stop()


async def test_handler_exception_still_completes_the_turn_c10(messaging, clients, identity):
    """C10: a failing handler is logged, its turn completed, and the worker serves on."""

    async def handler(ctx: TurnContext) -> None:
        if ctx.messages[0].text == "boom":
            raise RuntimeError("handler bug")
        await ctx.send_message("fine")

    worker = Worker(messaging.address, identity(AGENT), handler)
    try:
        receipt = await clients["alice"].send("boom", target=CREW)
        outcome = await worker.next_outcome()
        assert outcome.completed and isinstance(outcome.error, RuntimeError)
        records = await deliveries(clients["alice"], receipt.conversation_id)
        assert [d.status for d in records] == [m.DELIVERY_STATUS_HANDLED]

        await clients["alice"].send("again", inbox_id=receipt.inbox_id)
        page = await clients["alice"].read(receipt.inbox_id, wait_seconds=WAIT)
        assert [msg.text for msg in page.messages] == ["fine"]
    finally:
        await worker.stop()


async def test_heartbeat_keeps_a_slow_turn_alive_past_its_lease_r1_c10(
    messaging, clients, identity
):
    """R1/C10: while the handler runs longer than the lease, heartbeats keep the turn."""

    async def slow_handler(ctx: TurnContext) -> None:
        # Stands in for an agent that works longer than one lease period.
        await asyncio.sleep(LEASE + 1.5)
        await ctx.send_message("done after a while")

    worker = Worker(messaging.address, identity(AGENT), slow_handler)
    try:
        receipt = await clients["alice"].send("take your time", target=CREW)
        outcome = await asyncio.wait_for(worker.outcomes.get(), LEASE + WAIT)
        assert outcome.completed and not outcome.lease_lost
        records = await deliveries(clients["alice"], receipt.conversation_id)
        assert [d.status for d in records] == [m.DELIVERY_STATUS_HANDLED]
        assert [msg.text for msg in await read_all(clients["alice"], receipt.inbox_id)] == [
            "done after a while"
        ]
    finally:
        await worker.stop()


async def test_lost_runtime_turn_is_interrupted_and_not_redelivered_c11(
    messaging, clients, identity
):
    """C11: a runtime that dies mid-turn leaves it to expire; it is interrupted, not resent."""
    started = asyncio.Event()

    async def hanging_handler(ctx: TurnContext) -> None:
        started.set()
        await asyncio.Event().wait()  # the runtime "crashes" while in here

    first = Worker(messaging.address, identity(AGENT), hanging_handler)
    receipt = await clients["alice"].send("first", target=CREW)
    await asyncio.wait_for(started.wait(), WAIT)
    await first.kill()

    handled: list[list[str]] = []

    async def handler(ctx: TurnContext) -> None:
        handled.append([d.message.text for d in ctx.deliveries])
        await ctx.send_message("second handled")

    second = Worker(messaging.address, identity(AGENT), handler)
    try:
        # The conversation is busy until the dead turn's lease expires; the next turn
        # then carries only the new message, never the interrupted one.
        await clients["alice"].send("second", inbox_id=receipt.inbox_id)
        outcome = await asyncio.wait_for(second.outcomes.get(), LEASE + WAIT)
        assert outcome.completed
        assert handled == [["second"]]

        # Delivery records come oldest first: "first", then "second".
        records = await deliveries(clients["alice"], receipt.conversation_id)
        assert [d.status for d in records] == [
            m.DELIVERY_STATUS_INTERRUPTED,
            m.DELIVERY_STATUS_HANDLED,
        ]
    finally:
        await second.stop()


async def test_a_turn_cut_short_at_shutdown_is_given_up_at_once_not_left_to_its_lease_c11_r1(
    messaging, clients, identity
):
    """C11 R1: when the drain time is over (or at a second signal) the runtime is told why
    (`abandon`) and cancelled; the turn it cuts short is recorded `interrupted` at once and
    the conversation's next turn is claimable then, not when the lease would expire."""
    started = asyncio.Event()

    async def hanging_handler(ctx: TurnContext) -> None:
        started.set()
        await asyncio.Event().wait()  # waits on something that never comes

    lease = 60  # far longer than this test may take: the lease cannot be what ends it
    worker = TurnWorker(
        messaging.address, identity(AGENT), [CREW], hanging_handler, lease_seconds=lease
    )
    task = asyncio.create_task(worker.run())
    receipt = await clients["alice"].send("first", target=CREW)
    await asyncio.wait_for(started.wait(), WAIT)
    worker.abandon("the runtime stopped (SIGTERM) before the turn ended")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)

    [record] = await deliveries(clients["alice"], receipt.conversation_id)
    assert record.status == m.DELIVERY_STATUS_INTERRUPTED
    # The next message starts a turn at once, with only itself (nothing is resent).
    await clients["alice"].send("second", inbox_id=receipt.inbox_id)
    turn = await clients["agent"].claim_turn([CREW], wait_seconds=WAIT)
    assert turn is not None
    assert [d.message.text for d in turn.deliveries] == ["second"]


async def test_stop_finishes_the_current_turn_before_returning_r1(messaging, clients, identity):
    """R1: a graceful stop (SIGTERM) lets the turn in hand finish and complete."""
    started = asyncio.Event()
    release = asyncio.Event()

    async def handler(ctx: TurnContext) -> None:
        started.set()
        await release.wait()
        await ctx.send_message("finished after stop")

    worker = Worker(messaging.address, identity(AGENT), handler)
    receipt = await clients["alice"].send("work", target=CREW)
    await asyncio.wait_for(started.wait(), WAIT)
    worker.worker.stop()
    assert not worker.task.done()
    release.set()
    await asyncio.wait_for(worker.task, WAIT)

    outcome = worker.outcomes.get_nowait()
    assert outcome.completed
    assert [msg.text for msg in await read_all(clients["alice"], receipt.inbox_id)] == [
        "finished after stop"
    ]


async def test_stop_while_idle_returns_promptly_r1(messaging, clients, identity):
    """R1: stopping a worker blocked in a claim long-poll does not wait for the poll."""

    async def handler(ctx: TurnContext) -> None:  # pragma: no cover - never called
        raise AssertionError("no turn expected")

    worker = TurnWorker(messaging.address, identity(AGENT), [CREW], handler, wait_seconds=20)
    task = asyncio.create_task(worker.run())
    await asyncio.sleep(0)  # one loop step, so run() is inside its claim long-poll
    worker.stop()
    await asyncio.wait_for(task, 3)


async def test_unknown_key_is_fatal_and_reported_a2(messaging, clients):
    """A2: a runtime whose identity is signed with the wrong key stops with UNAUTHENTICATED."""

    async def handler(ctx: TurnContext) -> None:  # pragma: no cover - never called
        raise AssertionError("no turn expected")

    forged = Minter(AGENT, SigningKey.generate("gateway"))
    worker = TurnWorker(messaging.address, forged, [CREW], handler)
    with pytest.raises(Unauthenticated):
        await asyncio.wait_for(worker.run(), WAIT)


class ObservedClient(MessagingClient):
    """A MessagingClient that signals when a claim found the service unavailable."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.unavailable = asyncio.Event()

    async def claim_turn(self, *args, **kwargs):
        try:
            return await super().claim_turn(*args, **kwargs)
        except Unavailable:
            self.unavailable.set()
            raise


async def test_worker_reconnects_when_messaging_comes_back_r1(database_url, signing_keys, identity):
    """R1: a runtime started before messaging (or across a restart) backs off and reconnects."""
    from agentworks_messaging.app import start
    from agentworks_messaging.config import Config

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"

    async def handler(ctx: TurnContext) -> None:
        await ctx.send_message("back online")

    client = ObservedClient(address, identity=identity(AGENT), timeout=10)
    worker = TurnWorker(None, identity(AGENT), [CREW], handler, client=client, wait_seconds=2)
    task = asyncio.create_task(worker.run())
    running = None
    try:
        await asyncio.wait_for(client.unavailable.wait(), WAIT)
        assert not task.done()
        running = await start(
            Config.from_env(
                {
                    "MESSAGING_DATABASE_URL": database_url,
                    "MESSAGING_LISTEN": address,
                    **signing_keys.env("service:messaging"),
                    "LOG_JSON": "false",
                }
            )
        )
        operator = MessagingClient(address, identity=identity("user:ops", {"operator"}))
        alice = MessagingClient(address, identity=identity("user:alice"))
        await operator.register_target(CREW, owner="user:dev")
        receipt = await alice.send("are you there?", target=CREW)
        page = await alice.read(receipt.inbox_id, wait_seconds=WAIT + 5)
        assert [msg.text for msg in page.messages] == ["back online"]
        await operator.close()
        await alice.close()
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await client.close()
        if running is not None:
            await running.stop(0)


async def test_wake_me_requests_a_wake_up_that_returns_as_a_later_turn_s1_s2_c10(
    messaging, scheduler, clients, identity
):
    """S1/S2/C10: a handler asks for a wake-up of its own conversation (a retry with its
    per-turn key gets the same one); a later message does not cancel it; the scheduler
    tick delivers it as a wake_up turn with the note."""
    requested: list[s.WakeUp] = []
    retried: list[s.WakeUp] = []
    woken: list[m.Delivery] = []

    async def handler(ctx: TurnContext) -> None:
        for delivery in ctx.deliveries:
            if delivery.kind == m.DELIVERY_KIND_WAKE_UP:
                woken.append(delivery)
                await ctx.send_message(f"woke: {delivery.text}")
            elif delivery.message.text == "ping me later":
                at = datetime.now(UTC) + timedelta(seconds=1)
                requested.append(await ctx.wake_me(at=at, note="pong"))
                # What a retry after a lost answer sends: the same key, the same wake-up.
                assert ctx.scheduler is not None
                retried.append(
                    await ctx.scheduler.create_wake_up(
                        ctx.conversation_id,
                        at=at,
                        note="pong",
                        submission_id=f"turn:{ctx.turn_id}:wake:1",
                    )
                )
                await ctx.send_message("will do")
            else:
                await ctx.send_message(f"heard: {delivery.message.text}")

    worker = Worker(messaging.address, identity(AGENT), handler, scheduler.address)
    agent = SchedulerClient(scheduler.address, identity=identity(AGENT))
    try:
        receipt = await clients["alice"].send("ping me later", target=CREW)
        assert await read_until(clients["alice"], receipt.inbox_id, 1) == ["will do"]
        [wake_up] = requested
        assert [w.wake_up_id for w in retried] == [wake_up.wake_up_id]
        assert wake_up.conversation_id == receipt.conversation_id
        assert wake_up.created_by == AGENT and wake_up.product == CREW
        assert wake_up.status == s.WAKE_UP_STATUS_PENDING

        # S1: a received message does not cancel the wake-up.
        await clients["alice"].send("something else", inbox_id=receipt.inbox_id)
        texts = await read_until(clients["alice"], receipt.inbox_id, 3)
        assert sorted(texts[1:]) == ["heard: something else", "woke: pong"]

        # S2: it fired once, into this conversation, as its own delivery.
        [delivery] = woken
        assert delivery.text == "pong"
        attributes = delivery_attributes(delivery)
        assert attributes["wake_up_id"] == wake_up.wake_up_id
        assert attributes["requested_by"] == AGENT
        assert isinstance(attributes["late"], bool)
        fired = await agent.get_wake_up(wake_up.wake_up_id)
        assert fired.status == s.WAKE_UP_STATUS_FIRED and fired.delivery_id
    finally:
        await agent.close()
        await worker.stop()


async def test_demo_crew_remind_me_checks_back_after_the_wake_up_s1_s2_c6_r2(
    messaging, scheduler, clients, identity
):
    """S1/S2/C6/R2: "remind me in 1 s" -> the demo says it will check back, requests a
    wake-up, and sends the follow-up when the wake-up is delivered."""
    worker = Worker(messaging.address, identity(AGENT), demo_handle_turn, scheduler.address)
    try:
        text = "remind me in 1 second to stretch"
        receipt = await clients["alice"].send(text, target=CREW)
        assert await read_until(clients["alice"], receipt.inbox_id, 2) == [
            f"demo heard: {text}. I will check back in 1 s.",
            f"demo checking back: {text}",
        ]
        kinds = [d.kind for d in await deliveries(clients["alice"], receipt.conversation_id)]
        assert kinds == [m.DELIVERY_KIND_MESSAGE, m.DELIVERY_KIND_WAKE_UP]
    finally:
        await worker.stop()


def test_delivery_attributes_keep_their_numbers_types_s3_s5():
    """S3 S5: attributes travel as JSON text: the SDK hands a schedule's
    missed_occurrences or a webhook's signed_at back as the ints they were, integers past
    2^53 exactly, and fractions and nesting as they are; no attributes are `{}`."""
    sent = {
        "missed_occurrences": 2,
        "late_seconds": 0.25,
        "big": 2**60 + 1,
        "nested": {"n": [1, 2.5]},
    }
    delivery = m.Delivery(kind=m.DELIVERY_KIND_SCHEDULE, attributes_json=json.dumps(sent))
    attributes = delivery_attributes(delivery)
    assert attributes == sent
    assert type(attributes["missed_occurrences"]) is int
    assert type(attributes["nested"]["n"][0]) is int
    assert delivery_attributes(m.Delivery(kind=m.DELIVERY_KIND_SCHEDULE)) == {}


def test_reminder_delay_is_parsed_from_explicit_messages_only_c6():
    """C6: only a message that asks ("remind me") gets a wake-up; its delay is bounded."""
    assert reminder_delay("hello") is None
    assert reminder_delay("please REMIND ME later") == 30
    assert reminder_delay("remind me in 10 s") == 10
    assert reminder_delay("remind me in 2 minutes to stretch") == 120
    assert reminder_delay("remind me in 1 hour") == 3600
    assert reminder_delay("remind me in 0 seconds") == 1
    assert reminder_delay("remind me in 999999 hours") == 24 * 3600


async def test_wake_me_needs_a_scheduler_and_exactly_one_time_s1():
    """S1: wake_me refuses to guess: no scheduler configured, or not exactly one of
    after_seconds / at (aware), is an error before anything is sent."""
    log = structlog.get_logger("test")
    ctx = TurnContext(turn=m.Turn(conversation_id="c"), client=None, log=log)  # type: ignore[arg-type]
    with pytest.raises(PreconditionFailed, match="AGENTWORKS_SCHEDULER_ADDRESS"):
        await ctx.wake_me(after_seconds=5)
    ctx.scheduler = object()  # type: ignore[assignment]  # never reached
    for bad in ({}, {"after_seconds": 1, "at": datetime.now(UTC)}, {"at": datetime.now()}):
        with pytest.raises(ValueError):
            await ctx.wake_me(**bad)


class FakeWorker:
    """A worker that runs until stopped, or fails at once with `error`."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.stopped = asyncio.Event()
        self.running = asyncio.Event()

    def stop(self) -> None:
        self.stopped.set()

    async def run(self) -> None:
        self.running.set()
        if self.error is not None:
            raise self.error
        await self.stopped.wait()


async def test_one_signal_handler_stops_every_worker_in_the_process_r1():
    """R1: turns and executions served in one process stop together on one SIGTERM
    (a second handler per worker would replace the first)."""
    turns, executions = FakeWorker(), FakeWorker()
    run = asyncio.create_task(run_until_signal(turns, executions))
    await asyncio.wait_for(asyncio.gather(turns.running.wait(), executions.running.wait()), WAIT)
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(run, WAIT) == 0
    assert turns.stopped.is_set() and executions.stopped.is_set()


async def test_a_failing_worker_stops_the_others_and_exits_1_a2(capsys):
    """A2/R1: one worker refused (bad key) -> the others stop gracefully, exit code 1."""
    healthy = FakeWorker()
    broken = FakeWorker(Unauthenticated("identity signature is invalid"))
    assert await asyncio.wait_for(run_until_signal(healthy, broken), WAIT) == 1
    assert healthy.stopped.is_set()
    assert "identity signature is invalid" in capsys.readouterr().err


def test_the_runtime_names_its_own_unknown_variables_only_p4_r1(signing_keys):
    """P4 R1: AGENTWORKS_* is shared by the runtime, the CLI and the services' keys, so the
    runtime names only unread AGENTWORKS_RUNTIME_* variables."""
    config = RuntimeConfig.from_env(
        {
            **signing_keys.env("gateway"),
            "AGENTWORKS_RUNTIME_PRINCIPAL": "agent:demo/bot",
            "AGENTWORKS_RUNTIME_TARGETS": "crew:demo",
            "AGENTWORKS_RUNTIME_CONCURENCY": "4",
            "AGENTWORKS_TOKEN": "aw_for_the_cli",
        }
    )
    assert config.concurrency == 0  # not set: one turn at a time, executions by limits
    assert config.unknown_settings == (
        "AGENTWORKS_RUNTIME_CONCURENCY is not a setting and was ignored; "
        "did you mean AGENTWORKS_RUNTIME_CONCURRENCY?",
    )


class StubbornWorker(FakeWorker):
    """A worker whose work in hand never ends by itself (a handler waiting in ask)."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: list[str] = []

    def abandon(self, reason: str) -> None:
        self.reasons.append(reason)

    async def run(self) -> None:
        self.running.set()
        await asyncio.Event().wait()


async def test_the_first_signal_drains_for_drain_seconds_then_cancels_r1_f12():
    """R1 F12: after the first SIGTERM, work in hand gets `drain_seconds`; then every
    worker is told why (`abandon`) and cancelled, and the process exits 130."""
    stubborn, quick = StubbornWorker(), FakeWorker()
    run = asyncio.create_task(run_until_signal(stubborn, quick, drain_seconds=0.5))
    await asyncio.wait_for(asyncio.gather(stubborn.running.wait(), quick.running.wait()), WAIT)
    started = asyncio.get_running_loop().time()
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(run, WAIT) == 130
    assert asyncio.get_running_loop().time() - started >= 0.5
    assert quick.stopped.is_set()
    assert stubborn.reasons == [
        "the runtime stopped (SIGTERM) before the execution ended (drain time of 0.5 s "
        "over); call again"
    ]


def test_drain_seconds_come_from_the_environment_range_checked_r1(signing_keys):
    """R1: AGENTWORKS_RUNTIME_DRAIN_SECONDS is 0-3600 (default 30), refused otherwise."""
    base = {
        **signing_keys.env("gateway"),
        "AGENTWORKS_RUNTIME_PRINCIPAL": "agent:demo/bot",
        "AGENTWORKS_RUNTIME_TARGETS": "crew:demo",
    }
    assert RuntimeConfig.from_env(base).drain_seconds == 30
    config = RuntimeConfig.from_env({**base, "AGENTWORKS_RUNTIME_DRAIN_SECONDS": "0"})
    assert config.drain_seconds == 0 and not config.unknown_settings
    for bad in ("-1", "3601", "soon"):
        with pytest.raises(ValueError, match="AGENTWORKS_RUNTIME_DRAIN_SECONDS"):
            RuntimeConfig.from_env({**base, "AGENTWORKS_RUNTIME_DRAIN_SECONDS": bad})


async def test_a_turn_worker_for_an_unregistered_target_logs_target_not_registered_R1(
    messaging, identity, clients
):
    """R1: messaging lets a claim for a target it does not know wait like any quiet
    target's, so a turn worker started for a misspelled or unregistered crew would look
    idle for ever. At start it logs one `worker.target_not_registered` warning naming
    the target and how to register it, and keeps serving; a registered target gets none."""

    async def handler(ctx: TurnContext) -> None:
        return None

    async def started(targets: list[str]) -> list[MutableMapping[str, Any]]:
        worker = TurnWorker(
            messaging.address, identity("agent:dmeo/bot"), targets, handler, wait_seconds=1
        )
        with structlog.testing.capture_logs() as logs:
            task = asyncio.create_task(worker.run())
            try:
                await asyncio.sleep(2)  # the check, and a claim round (wait_seconds=1)
                assert not task.done()  # a warning, never a stop
            finally:
                worker.stop()
                await asyncio.wait_for(task, WAIT)
        return [e for e in logs if e["event"] == "worker.target_not_registered"]

    (warning,) = await started(["crew:dmeo", CREW])
    assert warning["unregistered"] == ["crew:dmeo"] and warning["log_level"] == "warning"
    assert "agentworks targets register crew:dmeo --owner" in warning["effect"]
    assert await started([CREW]) == []
