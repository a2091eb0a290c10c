"""The runtime SDK's reply that ends its turn: one request for the reply and the end."""

from __future__ import annotations

import asyncio

from agentworks.client import MessagingClient
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, TurnOutcome, TurnWorker

CREW = "crew:demo"
WAIT = 10


async def test_a_reply_with_end_turn_completes_the_turn_without_complete_turn_c6_c10_r1(
    messaging, identity
):
    """C6 C10 R1: `send_message(..., end_turn=True)` stores the reply and completes the
    turn in the same request; the worker reports it completed and makes no CompleteTurn
    of its own (a second one would be answered alike, so the record is the proof: the
    delivery is handled and the conversation's next message is a new turn)."""
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    await ops.register_target(CREW, owner="user:dev")
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    contexts: list[TurnContext] = []

    async def handler(ctx: TurnContext) -> None:
        contexts.append(ctx)
        await ctx.send_message(f"echo: {ctx.messages[0].text}", end_turn=True)

    worker = TurnWorker(
        messaging.address,
        identity("agent:demo/bot"),
        [CREW],
        handler,
        wait_seconds=2,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        receipt = await alice.send("hello", target=CREW)
        page = await alice.read(receipt.inbox_id, wait_seconds=WAIT)
        assert [msg.text for msg in page.messages] == ["echo: hello"]
        outcome = await asyncio.wait_for(outcomes.get(), WAIT)
        assert outcome.completed and outcome.error is None and contexts[0].ended
        transcript = await alice.get_transcript(receipt.conversation_id, limit=100)
        records = [e.delivery for e in transcript.entries if e.WhichOneof("entry") == "delivery"]
        assert [d.status for d in records] == [m.DELIVERY_STATUS_HANDLED]
        await alice.send("again", inbox_id=receipt.inbox_id)
        page = await alice.read(receipt.inbox_id, after=page.next_cursor, wait_seconds=WAIT)
        assert [msg.text for msg in page.messages] == ["echo: again"]
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        for client in (ops, alice):
            await client.close()
