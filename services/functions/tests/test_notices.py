"""Completion notices for internal callers, through a durable outbox (F13)."""

from __future__ import annotations

import asyncio

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


async def test_notices_sent_together_succeed_or_fail_each_on_its_own_F13(
    messaging, identity, clients, echo, functions, start_functions, database_url
):
    """F13: due notices go to messaging in one request; one for a conversation messaging
    does not know is recorded as failed and not retried, the others are delivered."""
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    try:
        await ops.register_target("crew:alpha", owner="user:owner")
        known = (await alice.send("echo twice", target="crew:alpha")).conversation_id
        scout = await clients("agent:alpha/scout")
        runtime = await clients("agent:demo/bot")
        unknown = "00000000-0000-4000-8000-000000000000"
        calls = {}
        for conversation in (known, unknown, known):
            call = await scout.call(
                "crew:demo", echo, {"text": "hi"}, notify_conversation_id=conversation
            )
            await runtime.claim_execution(["crew:demo"], wait_seconds=5)
            await runtime.finish_execution(call.call_id, final_message="echo: hi")
            calls[call.call_id] = conversation
        # This replica has no messaging: the three notices wait in the outbox together.
        await functions.stop(0)
        await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)

        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            for _ in range(100):
                rows = await (
                    await conn.execute(
                        "SELECT call_id::text, delivered_at IS NOT NULL, failed_at IS NOT NULL, "
                        "coalesce(last_error, '') FROM functions.notices"
                    )
                ).fetchall()
                if all(delivered or failed for _, delivered, failed, _ in rows):
                    break
                await asyncio.sleep(0.1)
            for call_id, delivered, failed, error in rows:
                if calls[call_id] == known:
                    assert (delivered, failed) == (True, False)
                else:
                    assert (delivered, failed) == (False, True)
                    assert error.startswith("permanent: NOT_FOUND")
            count = await (
                await conn.execute(
                    "SELECT count(*) FROM messaging.deliveries "
                    "WHERE kind = 'function_completed' AND conversation_id = %s",
                    (known,),
                )
            ).fetchone()
            assert count[0] == 2
    finally:
        for client in (ops, alice):
            await client.close()
