"""Per-principal shares in messaging (B7): new conversations are creations (a rate), and a
Read or ClaimTurn that waits holds one of the principal's long-polls."""

from __future__ import annotations

import asyncio

import pytest

from agentworks.core.errors import Busy
from agentworks.server import shares as shares_module
from agentworks.server.shares import Share, Shares
from agentworks.server.testing import database_snapshot, until


@pytest.fixture
def small_shares():
    """One long-poll at once and new conversations at 1 a second (bursts of 2), for
    every principal; the replica's shares are restored afterwards."""
    before = shares_module.shares()
    shares_module.configure(Shares(Share(waits=1, creates_per_second=1.0, burst=2)))
    yield
    shares_module.configure(before)


async def _parked(messaging, count: int) -> None:
    await until(lambda: messaging.database.listener.waiting >= count, 5)


async def test_new_conversations_past_a_principals_rate_are_refused_storing_nothing_B7(
    small_shares, clients, demo, database_url
):
    """B7: the third new conversation in a burst of two is refused RESOURCE_EXHAUSTED with
    a retry delay, and nothing is stored; continuing a conversation is no creation, and
    another principal's conversations are their own."""
    alice = await clients("user:alice")
    first = await alice.send("one", target=demo)
    await alice.send("two", target=demo)
    before = database_snapshot(database_url, ["messaging"])
    with pytest.raises(Busy) as refused:
        await alice.send("three", target=demo)
    assert refused.value.retry_after is not None and 0 < refused.value.retry_after <= 1.0
    assert refused.value.metadata.get("share") == "creates_per_second"
    assert "conversations" in refused.value.message
    assert database_snapshot(database_url, ["messaging"]) == before
    await alice.send("more", inbox_id=first.inbox_id)  # continuing: no creation
    bob = await clients("user:bob")
    await bob.send("mine", target=demo)


async def test_a_waiting_read_and_claim_hold_one_of_the_principals_long_polls_B7(
    small_shares, clients, demo, messaging
):
    """B7: with a share of one long-poll, a principal's second waiting Read is refused
    at once with a retry delay while its first waits; another principal still waits; a
    read with messages ready never waits and is not counted; ClaimTurn alike."""
    alice = await clients("user:alice")
    receipt = await alice.send("hi", target=demo)
    waiting = asyncio.create_task(alice.read(receipt.inbox_id, wait_seconds=10))
    await _parked(messaging, 1)
    with pytest.raises(Busy) as refused:
        await alice.read(receipt.inbox_id, wait_seconds=10)
    assert refused.value.metadata.get("share") == "waits"
    assert refused.value.retry_after is not None
    await alice.read(receipt.inbox_id)  # no wait: no long-poll taken

    bob = await clients("user:bob")
    theirs = await bob.send("hi", target=demo)
    other = asyncio.create_task(bob.read(theirs.inbox_id, wait_seconds=10))
    await _parked(messaging, 2)

    bot = await clients("agent:demo/bot")
    turn = await bot.claim_turn([demo], wait_seconds=5)  # work ready: no wait
    await bot.claim_turn([demo], wait_seconds=5)
    claim = asyncio.create_task(bot.claim_turn([demo], wait_seconds=10))
    await _parked(messaging, 3)
    with pytest.raises(Busy):
        await bot.claim_turn([demo], wait_seconds=10)

    await bot.send_message(turn.reply_inbox_id, "answer")  # alice's wait ends
    answered = await waiting
    assert [m.text for m in answered.messages] == ["answer"]
    # Her long-poll is hers again: this one waits its second out, and is not refused.
    page = await alice.read(receipt.inbox_id, after=answered.next_cursor, wait_seconds=1)
    assert list(page.messages) == []
    for task in (other, claim):
        task.cancel()
    await asyncio.gather(other, claim, return_exceptions=True)
