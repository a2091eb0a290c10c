"""Messaging under faults: kill -9 during load, PostgreSQL stopped and restarted.

Nothing acknowledged is lost or stored twice (C4, C5), outages answer UNAVAILABLE instead
of hanging, and the service recovers on its own (P3, P4).
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import AgentWorksError, DeadlineExceeded, Unavailable
from agentworks.messaging.v1 import messaging_pb2 as m

pytestmark = pytest.mark.timeout(180)

RETRYABLE = (Unavailable, DeadlineExceeded)


async def send_until_acknowledged(
    client: MessagingClient, target: str, submission_id: str, deadline: float
) -> m.SendReceipt:
    """What a careful client does: retry with the same submission_id until a receipt."""
    while True:
        try:
            return await client.send(
                f"payload {submission_id}", target=target, submission_id=submission_id
            )
        except RETRYABLE:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: messaging killed under sends (C4, C5, P3)",
    action="SIGKILL messaging twice under 6 steady senders retrying with submission_ids; "
    "restart each time",
    check="every acknowledged message stored exactly once, no message without a receipt",
)
async def test_kill_9_during_sends_loses_and_duplicates_nothing_C4_C5_P3(
    database_url, service_process, identity
):
    """C4 C5 P3: messaging is SIGKILLed twice under steady sends and restarted; every
    acknowledged message is stored exactly once and no message lacks its receipt."""
    # The senders start conversations as fast as they can: an operator's share (B7).
    proc = service_process(
        "agentworks_messaging",
        "MESSAGING",
        database_url,
        AGENTWORKS_PRINCIPAL_SHARES='{"default": {"creates_per_second": 100000, "burst": 100000}}',
    )
    async with MessagingClient(
        proc.address, identity=identity("user:ops", {"operator"}), timeout=5
    ) as ops:
        await ops.register_target("crew:load", owner="user:ops")

    acknowledged: dict[str, str] = {}
    stop = asyncio.Event()
    deadline = time.monotonic() + 90

    async def sender(n: int) -> None:
        async with MessagingClient(proc.address, identity=identity(f"user:s{n}"), timeout=5) as c:
            i = 0
            while not stop.is_set():
                key = f"s{n}-{i}"
                receipt = await send_until_acknowledged(c, "crew:load", key, deadline)
                acknowledged[f"user:s{n}/{key}"] = receipt.message_id
                i += 1

    senders = [asyncio.create_task(sender(n)) for n in range(6)]
    for _ in range(2):
        await asyncio.sleep(1.0)  # steady load before the crash
        proc.kill()
        await asyncio.to_thread(proc.start)
    await asyncio.sleep(1.0)
    stop.set()
    await asyncio.gather(*senders)

    with psycopg.connect(database_url) as conn:
        stored = conn.execute(
            "SELECT s.principal || '/' || s.submission_id, m.id::text,"
            " count(*) OVER (PARTITION BY m.text)"
            " FROM messaging.submissions s JOIN messaging.messages m ON m.id = s.message_id"
        ).fetchall()
        total_messages = conn.execute("SELECT count(*) FROM messaging.messages").fetchall()[0][0]
    assert len(acknowledged) > 20, "the load was too light to mean anything"
    assert {key: mid for key, mid, _ in stored} == acknowledged
    assert all(copies == 1 for _, _, copies in stored)
    assert total_messages == len(acknowledged)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="PostgreSQL outage: messaging (P3, P4)",
    action="stop PostgreSQL while a Read long-poll waits; send during the outage; start it",
    check="send and the long-poll end UNAVAILABLE in < 15 s; the same process serves again "
    "on its own; the message acknowledged before is kept and not duplicated",
)
async def test_database_outage_answers_unavailable_and_recovers_P3_P4(
    fault_postgres, start_messaging, identity
):
    """P3 P4: with PostgreSQL down, calls and an in-flight long-poll end with UNAVAILABLE
    quickly; when it is back the same service process serves again, nothing lost."""
    service = await start_messaging(
        MESSAGING_DATABASE_URL=fault_postgres.url, MESSAGING_POLL_FALLBACK_SECONDS="0.5"
    )
    async with (
        MessagingClient(service.address, identity=identity("user:ops", {"operator"})) as ops,
        MessagingClient(service.address, identity=identity("user:alice"), timeout=10) as alice,
    ):
        await ops.register_target("crew:db", owner="user:ops")
        before = await alice.send("before the outage", target="crew:db", submission_id="b1")
        poll = asyncio.create_task(alice.read(before.inbox_id, wait_seconds=20))
        await asyncio.sleep(0.3)

        await asyncio.to_thread(fault_postgres.stop)
        started = time.monotonic()
        with pytest.raises(Unavailable):
            await alice.send("during the outage", target="crew:db")
        with pytest.raises(AgentWorksError) as polled:
            await poll
        assert isinstance(polled.value, Unavailable), polled.value
        assert time.monotonic() - started < 15, "an outage must not hang callers"

        await asyncio.to_thread(fault_postgres.start)
        recovered = None
        for _ in range(100):
            try:
                recovered = await alice.send("after", target="crew:db", submission_id="a1")
                break
            except Unavailable:
                await asyncio.sleep(0.1)
        assert recovered is not None, "the service did not recover on its own"
        again = await alice.send("before the outage", target="crew:db", submission_id="b1")
        assert again == before  # acknowledged before the outage, still there, not duplicated


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Graceful shutdown of messaging (P4, C10)",
    action="SIGTERM while a Read long-poll waits and a runtime holds a turn; restart",
    check="the read returns an empty page (not an error), exit code 0 in < 10 s; the turn's "
    "lease survives the restart and the turn completes",
)
async def test_sigterm_drains_long_polls_and_keeps_leases_P4_C10(
    database_url, service_process, identity
):
    """P4 C10: SIGTERM ends waiting reads with an empty page (not an error), the process
    exits cleanly, and a turn's lease survives the restart of the service."""
    proc = service_process("agentworks_messaging", "MESSAGING", database_url)
    async with MessagingClient(proc.address, identity=identity("user:ops", {"operator"})) as ops:
        await ops.register_target("crew:drain", owner="user:ops")
    async with (
        MessagingClient(proc.address, identity=identity("user:alice")) as alice,
        MessagingClient(proc.address, identity=identity("agent:drain/bot")) as bot,
    ):
        receipt = await alice.send("work", target="crew:drain")
        turn = await bot.claim_turn(["crew:drain"], wait_seconds=5, lease_seconds=60)
        assert turn is not None
        waiting = asyncio.create_task(alice.read(receipt.inbox_id, wait_seconds=20))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        code = await asyncio.to_thread(proc.terminate)
        page = await waiting
        assert code == 0
        assert list(page.messages) == []
        assert time.monotonic() - started < 10

        await asyncio.to_thread(proc.start)
        # The channel may still be reconnecting: a runtime retries UNAVAILABLE, as here.
        deadline = time.monotonic() + 30
        while True:
            try:
                await bot.heartbeat_turn(turn.turn_id, lease_seconds=60)
                break
            except RETRYABLE:
                assert time.monotonic() < deadline, "messaging did not come back"
                await asyncio.sleep(0.1)
        await bot.send_message(turn.reply_inbox_id, "done after the restart")
        await bot.complete_turn(turn.turn_id)
        page = await alice.read(receipt.inbox_id)
        assert [m.text for m in page.messages] == ["done after the restart"]
