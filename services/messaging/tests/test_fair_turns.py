"""Fair turns (B9): a crew's turns are claimed round its callers, so one caller's burst of
conversations delays another caller's turn by at most one turn."""

from __future__ import annotations

import psycopg
import pytest

from tests.fixtures.plans import blocks_hit, prepare_generic_claim

BURST = 200


async def _burst(database_url: str, inbox_id: str, count: int) -> None:
    """`count` more conversations like the inbox's (same caller and target), each with an
    inbox and one wake-up waiting, queued one by one as Send queues them (the trigger
    orders them): the issue's burst, without 2,000 round trips."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            """
            WITH conv AS (
                INSERT INTO messaging.conversations (id, target_kind, target_name,
                    started_by, last_position, pending_deliveries, oldest_pending_at)
                SELECT gen_random_uuid(), c.target_kind, c.target_name, c.started_by, 1, 1,
                       clock_timestamp()
                FROM messaging.conversations c
                JOIN messaging.inboxes i ON i.conversation_id = c.id,
                     generate_series(1, %(count)s)
                WHERE i.id = %(inbox)s
                RETURNING id, started_by
            ), inbox AS (
                INSERT INTO messaging.inboxes (id, conversation_id, principal)
                SELECT gen_random_uuid(), id, started_by FROM conv
            )
            INSERT INTO messaging.deliveries (id, conversation_id, position, kind, text)
            SELECT gen_random_uuid(), id, 1, 'wake_up', 'burst' FROM conv
            """,
            {"count": count, "inbox": inbox_id},
        )


async def _take_turns(bot, target, count: int) -> list[str]:
    """Claim and complete `count` turns of `target` one at a time, as one runtime does:
    their conversations, in the order claimed."""
    claimed: list[str] = []
    for _ in range(count):
        turn = await bot.claim_turn([target], wait_seconds=5)
        assert turn is not None
        claimed.append(turn.conversation_id)
        await bot.complete_turn(turn.turn_id)
    return claimed


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="One caller's burst of conversations with a crew (B5, B9)",
    action=f"a caller opens {BURST + 1} conversations with crew:demo (the issue: 2,000 in 5 s), "
    "then another caller sends one; a runtime claims and completes turns one at a time",
    check="the other caller's turn is handed within the first two claims (was behind all "
    "of the burst: its reply went 0.02 -> 15.5 s); the burst's turns all follow",
)
async def test_a_burst_of_one_caller_delays_another_callers_turn_by_one_turn_at_most_B9(
    clients, demo, database_url
):
    """B9: round the callers, one conversation each: caller B's conversation, sent after
    caller A's 201, is claimed first or second, whichever of A's is first."""
    mallory = await clients("user:mallory")
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    first = await mallory.send("burst 0", target=demo)
    await _burst(database_url, first.inbox_id, BURST)
    for i in range(1, 4):  # and a few through Send itself
        await mallory.send(f"burst {i}", target=demo)
    victim = await alice.send("my question", target=demo)
    claimed = await _take_turns(bot, demo, 3)
    assert victim.conversation_id in claimed[:2], claimed
    assert claimed[0] == first.conversation_id  # the burst's first still goes first (age)


async def test_a_caller_with_several_conversations_is_served_in_turn_with_others_B9(clients, demo):
    """B9: three callers with three conversations each, queued one caller after another,
    are claimed round the callers (a, b, c, a, b, c, ...), each caller's in age order; a
    conversation sent to again after its turn joins the order as its caller's next."""
    callers = {name: await clients(f"user:{name}") for name in ("ann", "bob", "cyd")}
    sent: dict[str, list[str]] = {}
    for name, client in callers.items():
        sent[name] = [
            (await client.send(f"{name} {i}", target=demo)).conversation_id for i in range(3)
        ]
    owner = {cid: name for name, cids in sent.items() for cid in cids}
    bot = await clients("agent:demo/bot")
    order = await _take_turns(bot, demo, 9)
    assert [owner[c] for c in order] == ["ann", "bob", "cyd"] * 3
    assert [c for c in order if owner[c] == "ann"] == sent["ann"]


async def test_a_fair_claim_reads_a_few_rows_however_long_one_callers_queue_is_B9_C10(
    clients, demo, database_url
):
    """B9 C10: the fair claim still reads a few rows: with one caller's 2,000
    conversations queued, a generic plan made while the table was small takes another
    caller's conversation (its turn is due) through `conversations_claimable`."""
    mallory = await clients("user:mallory")
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    first = await mallory.send("burst 0", target=demo)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        execute, turn_id = await prepare_generic_claim(conn)
        await _burst(database_url, first.inbox_id, 2000)
        victim = await alice.send("my question", target=demo)
        turn = await bot.claim_turn([demo], wait_seconds=5)  # mallory's first, by age
        assert turn is not None and turn.conversation_id == first.conversation_id
        async with conn.transaction(force_rollback=True):
            blocks, plan = await blocks_hit(conn, execute)
            [(active,)] = await (
                await conn.execute(
                    "SELECT active_turn_id FROM messaging.conversations WHERE id = %s",
                    (victim.conversation_id,),
                )
            ).fetchall()
    assert str(active) == turn_id  # the claim took the other caller's
    # Not 2,000 conversations' rows, nor their 2,000 pending deliveries (a generic plan
    # once walked every pending delivery: 2,014 blocks).
    assert blocks < 100, plan  # not 2,000 conversations' rows
