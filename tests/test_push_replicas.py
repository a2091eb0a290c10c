"""Push across replicas (N1): a typed client's inbox stream survives a kill -9 of the
messaging replica it was streaming from, resuming on the other from its last cursor
with every message exactly once."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from agentworks.client import MessagingClient
from agentworks.core.errors import DeadlineExceeded, Unavailable

pytestmark = pytest.mark.timeout(120)


async def _reply(bot: MessagingClient, inbox: str, text: str) -> None:
    """An agent's reply, retried with its key until acknowledged (a replica is down)."""
    for _ in range(100):
        try:
            await bot.send_message(inbox, text, submission_id=text)
            return
        except (Unavailable, DeadlineExceeded):
            await asyncio.sleep(0.1)
    raise AssertionError(f"{text!r} was never acknowledged")


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: the messaging replica under an inbox stream killed (N1)",
    action="a typed client streams an inbox over a channel to two messaging processes; "
    "each replica in turn is SIGKILLed (and restarted) while replies keep coming",
    check="the client's iterator resumes on the other replica from its last cursor by "
    "itself; every reply reaches it exactly once, in order",
)
async def test_an_inbox_stream_survives_a_kill_9_of_its_replica_N1_P3(
    database_url, service_process, identity
):
    """N1 P3: two messaging processes behind one round-robin channel; the stream is on
    one of them. Killing each in turn (one of the kills is the stream's replica), the
    iterator resumes by itself from its last cursor: all 15 replies arrive once each,
    in order, and at least one resume happened."""
    replicas = [
        service_process("agentworks_messaging", "MESSAGING", database_url) for _ in range(2)
    ]
    addresses = ",".join(r.address for r in replicas)
    async with (
        MessagingClient(addresses, identity=identity("user:ops", {"operator"})) as ops,
        MessagingClient(addresses, identity=identity("user:alice"), timeout=5) as alice,
        MessagingClient(addresses, identity=identity("agent:demo/bot"), timeout=5) as bot,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        inbox = (await alice.send("hello", target="crew:demo")).inbox_id
        received: list[str] = []
        arrived = asyncio.Event()

        async def follow() -> None:
            async for event in alice.subscribe(inbox, heartbeat_seconds=5):
                received.append(event.message.text)
                arrived.set()

        async def until_received(count: int) -> None:
            while len(received) < count:
                arrived.clear()
                await asyncio.wait_for(arrived.wait(), 30)

        sent: list[str] = []
        with capture_logs() as logs:
            follower = asyncio.create_task(follow())
            try:
                for n in range(5):
                    sent.append(f"before-{n}")
                    await _reply(bot, inbox, sent[-1])
                await until_received(len(sent))
                for victim in replicas:
                    victim.kill()
                    for n in range(5):
                        sent.append(f"after-kill-{replicas.index(victim)}-{n}")
                        await _reply(bot, inbox, sent[-1])
                    await until_received(len(sent))
                    await asyncio.to_thread(victim.start)
            finally:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
    assert received == sent  # each once, in order, across both kills
    resumes = [entry for entry in logs if entry["event"] == "stream.resuming"]
    assert resumes, "the stream never broke: neither kill hit its replica"
