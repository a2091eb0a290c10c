"""Completion notices for internal callers, through a durable outbox (F13)."""

from __future__ import annotations

import psycopg

from agentworks.core.clients import MessagingClient
from agentworks.messaging.v1 import messaging_pb2 as m


async def test_completion_notice_reaches_the_callers_conversation_exactly_once_F13(
    messaging, identity, clients, echo, functions, start_functions, database_url
):
    """F13: an agent's call ends -> one function_completed delivery in its conversation,

    even when the replica that ended the call could not reach messaging and stopped
    (a crash between finishing and notifying), and two other replicas then race to send it.
    """
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    scout_chat = MessagingClient(messaging.address, identity=identity("agent:alpha/scout"))
    try:
        await ops.register_target("crew:alpha", owner="user:owner")
        receipt = await alice.send("please get an echo", target="crew:alpha")
        turn = await scout_chat.claim_turn(["crew:alpha"], wait_seconds=5)
        await scout_chat.complete_turn(turn.turn_id)

        # The agent calls a function and asks for the notice in its conversation.
        scout = await clients("agent:alpha/scout")
        call = await scout.call(
            "crew:demo",
            echo,
            {"text": "hi"},
            notify_conversation_id=receipt.conversation_id,
        )
        runtime = await clients("agent:demo/bot")
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)
        await runtime.finish_execution(call.call_id, final_message="echo: hi")
        # This replica has no messaging (127.0.0.1:1): the notice stays in the outbox.
        await functions.stop(0)
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            row = await (
                await conn.execute("SELECT delivered_at, attempts FROM functions.notices")
            ).fetchone()
        assert row[0] is None

        for _ in range(2):
            await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)
        notice_turn = await scout_chat.claim_turn(["crew:alpha"], wait_seconds=20)
        assert notice_turn is not None
        [delivery] = notice_turn.deliveries
        assert delivery.kind == m.DELIVERY_KIND_FUNCTION_COMPLETED
        assert dict(delivery.attributes)["call_id"] == call.call_id
        assert dict(delivery.attributes)["status"] == "completed"
        assert call.call_id in delivery.text and "functions status" in delivery.text
        await scout_chat.complete_turn(notice_turn.turn_id)

        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM messaging.deliveries WHERE kind = 'function_completed'"
                )
            ).fetchone()
            assert row[0] == 1
            row = await (
                await conn.execute("SELECT delivered_at FROM functions.notices")
            ).fetchone()
            assert row[0] is not None
    finally:
        for client in (ops, alice, scout_chat):
            await client.close()
