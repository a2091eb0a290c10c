"""The turn's fast path: a reply that completes its turn, one claim woken per new turn."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from agentworks.core.errors import InvalidArgument, PreconditionFailed
from agentworks.server.testing import until
from tests.fixtures.plans import blocks_hit, prepare_generic_claim


async def test_a_reply_completes_its_turn_in_the_same_request_and_a_retry_is_fine_C6_C10(
    clients, demo
):
    """C6 C10: SendMessage with complete_turn_id stores the reply and completes the
    turn; the conversation's next delivery is a new turn at once, and repeating the
    request (a retry after a lost answer) neither sends twice nor fails."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("question", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    reply = await bot.send_message(
        turn.reply_inbox_id, "answer", submission_id="r1", complete_turn_id=turn.turn_id
    )
    again = await bot.send_message(
        turn.reply_inbox_id, "answer", submission_id="r1", complete_turn_id=turn.turn_id
    )
    assert again.message_id == reply.message_id
    page = await alice.read(receipt.inbox_id)
    assert [m.text for m in page.messages] == ["answer"]
    await bot.complete_turn(turn.turn_id)  # completed already: answered alike
    await alice.send("follow-up", inbox_id=receipt.inbox_id)
    follow = await bot.claim_turn([demo], wait_seconds=5)
    assert follow is not None and follow.turn_id != turn.turn_id
    assert [d.message.text for d in follow.deliveries] == ["follow-up"]


async def test_a_reply_naming_another_conversations_turn_is_refused_storing_nothing_C6(
    clients, demo
):
    """C6 C10: complete_turn_id must be the turn of the reply's own conversation; else
    INVALID_ARGUMENT, no reply stored and the other turn still running."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    first = await alice.send("one", target=demo)
    await alice.send("two", target=demo)
    turn_a = await bot.claim_turn([demo], wait_seconds=5)
    turn_b = await bot.claim_turn([demo], wait_seconds=5)
    assert turn_a.conversation_id == first.conversation_id
    with pytest.raises(InvalidArgument, match="another conversation"):
        await bot.send_message(turn_a.reply_inbox_id, "x", complete_turn_id=turn_b.turn_id)
    assert list((await alice.read(first.inbox_id)).messages) == []
    await bot.heartbeat_turn(turn_b.turn_id)  # still active


async def test_a_reply_naming_an_interrupted_turn_is_refused_storing_nothing_C11(clients, demo):
    """C11: a turn already recorded interrupted cannot be completed by a reply; the reply
    is refused (FAILED_PRECONDITION) and not stored."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("question", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    await bot.complete_turn(turn.turn_id, interrupted=True)
    with pytest.raises(PreconditionFailed, match="interrupted"):
        await bot.send_message(turn.reply_inbox_id, "late", complete_turn_id=turn.turn_id)
    assert list((await alice.read(receipt.inbox_id)).messages) == []


async def test_a_new_turn_wakes_one_idle_claim_not_every_one_C10_P3(clients, demo, messaging):
    """C10 P3: with five runtimes waiting in ClaimTurn, a new message wakes one of them
    (one claim statement per turn, not one per idle runtime); the others keep waiting
    and the next message is claimed by one of them."""
    alice = await clients("user:alice")
    bots = [await clients(f"agent:demo/r{i}") for i in range(5)]
    listener = messaging.database.listener
    claims = {asyncio.create_task(b.claim_turn([demo], wait_seconds=10)) for b in bots}
    await until(lambda: listener.waiting >= 5, 5)  # every claim parked in its long-poll
    before = listener.wakeups
    await alice.send("one", target=demo)
    done, claims = await asyncio.wait(claims, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and done.pop().result() is not None
    await asyncio.sleep(0.3)  # time for wrong wake-ups to show: none may come
    assert listener.wakeups - before == 1
    assert not any(c.done() for c in claims)
    await alice.send("two", target=demo)
    done, claims = await asyncio.wait(claims, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and done.pop().result() is not None
    for c in claims:
        c.cancel()
    await asyncio.gather(*claims, return_exceptions=True)


async def test_deliveries_sent_while_a_claim_runs_are_never_stranded_C10_R1(clients, demo):
    """C10 R1: messages sent into a conversation while runtimes claim and complete its
    turns, all at once, are every one handed in some turn: a delivery stored between a
    claim's snapshot and its lock on the conversation stays pending and counted (the
    claim subtracts what it took rather than zeroing the count), so the next claim gets
    it instead of it waiting for ever."""
    alice = await clients("user:alice")
    receipt = await alice.send("open", target=demo)
    senders, each, claimers = 4, 40, 3
    expected = 1 + senders * each
    handed: list[str] = []

    async def send(n: int) -> None:
        for i in range(each):
            await alice.send(f"s{n}-{i}", inbox_id=receipt.inbox_id)

    async def claim(n: int) -> None:
        bot = await clients(f"agent:demo/c{n}")
        while len(handed) < expected:
            turn = await bot.claim_turn([demo], wait_seconds=1)
            if turn is None:
                continue
            handed.extend(d.delivery_id for d in turn.deliveries)
            await bot.complete_turn(turn.turn_id)

    workers = [asyncio.create_task(claim(n)) for n in range(claimers)]
    await asyncio.gather(*(send(n) for n in range(senders)))
    await asyncio.wait(workers, timeout=20)
    for task in workers:
        task.cancel()
    assert len(handed) == len(set(handed)) == expected, (
        f"{expected - len(set(handed))} deliveries stranded"
    )


async def test_a_claim_reads_a_few_rows_however_many_conversations_the_target_has_C10_R1(
    clients, demo, database_url
):
    """C10 R1: ClaimTurn reads a few rows, not every conversation of the target. A
    replica's prepared claim gets its generic plan once, maybe while conversations is
    small (a new database), and keeps it until the table is analyzed; a plan made then
    must still go by the claimable conversations (`conversations_claimable`), both for
    the one it takes and for whether there are more, and not scan the target's
    conversations through the listing index by target."""
    alice = await clients("user:alice")
    first = await alice.send("the first", target=demo)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        execute, turn_id = await prepare_generic_claim(conn)
        # 2,000 more conversations of the target, older, none with work waiting.
        await conn.execute(
            "INSERT INTO messaging.conversations SELECT (jsonb_populate_record("
            "NULL::messaging.conversations, to_jsonb(c) || jsonb_build_object("
            "'id', gen_random_uuid(), 'pending_deliveries', 0, 'oldest_pending_at', NULL, "
            "'created_at', now() - interval '1 hour'))).* "
            "FROM messaging.conversations c, generate_series(1, 2000) WHERE c.id = %s",
            (first.conversation_id,),
        )
        async with conn.transaction(force_rollback=True):
            blocks, plan = await blocks_hit(conn, execute)
            [(active,)] = await (
                await conn.execute(
                    "SELECT active_turn_id FROM messaging.conversations WHERE id = %s",
                    (first.conversation_id,),
                )
            ).fetchall()
    assert str(active) == turn_id  # the claim took the conversation waiting
    assert blocks < 100, plan  # not 2,000 conversations' rows
