"""A turn handler's capability (T3): `TurnContext.capability`, renewed by the worker's
heartbeats, lets another process act in the turn's conversation only."""

from __future__ import annotations

import asyncio

import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import PermissionDenied
from agentworks.core.identity import Forwarded
from agentworks.runtime import TurnContext, TurnOutcome, TurnWorker

pytestmark = pytest.mark.timeout(60)


async def test_a_turn_handler_gets_its_capability_renewed_with_the_lease_T3_R1(messaging, identity):
    """T3 R1: ctx.capability is the claimed turn's; a heartbeat renews it; with it a
    client holding nothing else replies into the turn's conversation, and is refused
    reading the inbox."""
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    await ops.register_target("crew:demo", owner="user:owner")
    seen: dict[str, object] = {}

    async def handler(ctx: TurnContext) -> None:
        first = ctx.capability
        for _ in range(50):  # a heartbeat every third of the 5 s lease
            if ctx.capability != first:
                break
            await asyncio.sleep(0.1)
        seen.update(first=first, renewed=ctx.capability)
        async with MessagingClient(messaging.address, identity=Forwarded(ctx.capability)) as child:
            await child.send_message(ctx.turn.reply_inbox_id, "from the child")
            with pytest.raises(PermissionDenied, match="a turn capability allows only"):
                await child.read(ctx.turn.reply_inbox_id)

    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    worker = TurnWorker(
        messaging.address,
        identity("agent:demo/bot"),
        ["crew:demo"],
        handler,
        wait_seconds=2,
        lease_seconds=5,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        receipt = await alice.send("hello", target="crew:demo")
        outcome = await asyncio.wait_for(outcomes.get(), 30)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert outcome.completed and outcome.error is None, outcome
    assert seen["first"] and seen["renewed"] and seen["first"] != seen["renewed"]
    messages = (await alice.read(receipt.inbox_id, limit=10)).messages
    assert [(x.sender, x.text) for x in messages] == [("agent:demo/bot", "from the child")]
    for client in (ops, alice):
        await client.close()
