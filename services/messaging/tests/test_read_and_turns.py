"""Cursor reads, long-polls, the turn queue, leases, transcripts, deliveries (C6-C12)."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from google.protobuf.json_format import MessageToDict

from agentworks.client import MessagingClient
from agentworks.core.errors import InvalidArgument, NotFound, PermissionDenied, PreconditionFailed
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.server.testing import until


async def reply_all(bot: MessagingClient, target: str, texts: list[str]) -> str:
    """Claim the next turn, send each text to its inbox, complete it; the inbox id."""
    turn = await bot.claim_turn([target], wait_seconds=5)
    assert turn is not None
    for text in texts:
        await bot.send_message(turn.reply_inbox_id, text)
    await bot.complete_turn(turn.turn_id)
    return turn.reply_inbox_id


async def test_reads_are_cursor_pages_oldest_first_and_non_destructive_C7(clients, demo):
    """C7: oldest first, next_cursor advances, the same cursor gives the same page."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("report please", target=demo)
    await reply_all(bot, demo, ["ack", "working", "done"])

    first = await alice.read(receipt.inbox_id, limit=2)
    assert [m.text for m in first.messages] == ["ack", "working"]
    assert [m.direction for m in first.messages] == ["to_inbox", "to_inbox"]
    again = await alice.read(receipt.inbox_id, limit=2)
    assert again == first  # reading consumes nothing

    second = await alice.read(receipt.inbox_id, after=first.next_cursor, limit=2)
    assert [m.text for m in second.messages] == ["done"]
    empty = await alice.read(receipt.inbox_id, after=second.next_cursor)
    assert list(empty.messages) == []  # nothing new is not failure or completion
    assert empty.next_cursor == second.next_cursor


async def test_a_receipts_cursor_reads_only_the_replies_after_its_message_C7_C4(clients, demo):
    """C7 C4: a send's receipt carries its message's place in the conversation; read or
    subscribed from it, the inbox gives only the replies that came after that message
    (no paging through the earlier ones); a retry's receipt has the original's cursor;
    an agent's reply's receipt the reply's own."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    first = await alice.send("one", target=demo)
    await reply_all(bot, demo, ["a1", "a2"])
    assert [m.text for m in (await alice.read(first.inbox_id, after=first.cursor)).messages] == [
        "a1",
        "a2",
    ]

    second = await alice.send("two", inbox_id=first.inbox_id, submission_id="k2")
    retried = await alice.send("two", inbox_id=first.inbox_id, submission_id="k2")
    assert retried.message_id == second.message_id and retried.cursor == second.cursor
    assert list((await alice.read(first.inbox_id, after=second.cursor)).messages) == []
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None
    reply = await bot.send_message(turn.reply_inbox_id, "b1")
    await bot.send_message(turn.reply_inbox_id, "b2")
    await bot.complete_turn(turn.turn_id)
    page = await alice.read(first.inbox_id, after=second.cursor)
    assert [m.text for m in page.messages] == ["b1", "b2"]
    after_reply = await alice.read(first.inbox_id, after=reply.cursor)
    assert [m.text for m in after_reply.messages] == ["b2"]
    events = alice.subscribe(first.inbox_id, after=second.cursor)
    try:
        event = await asyncio.wait_for(anext(events), 10)
        assert event.message.text == "b1"
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def test_a_newest_read_takes_the_inbox_end_in_one_page_C7_B1(clients, demo):
    """C7 B1: `newest` gives the newest `limit` messages, oldest first, and the cursor
    after them (what comes later reads from there), without paging through the inbox;
    with `after` or `wait_seconds` it is refused, naming the rule; another caller's
    inbox is not found, as for any read (A3)."""
    alice = await clients("user:alice")
    bob = await clients("user:bob")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("report", target=demo)
    await reply_all(bot, demo, [f"r{i}" for i in range(7)])

    newest = await alice.read(receipt.inbox_id, limit=3, newest=True)
    assert [m.text for m in newest.messages] == ["r4", "r5", "r6"]
    assert list((await alice.read(receipt.inbox_id, after=newest.next_cursor)).messages) == []
    await alice.send("more", inbox_id=receipt.inbox_id)
    await reply_all(bot, demo, ["r7"])
    later = await alice.read(receipt.inbox_id, after=newest.next_cursor)
    assert [m.text for m in later.messages] == ["r7"]

    empty = await alice.send("new one", target=demo)
    nothing = await alice.read(empty.inbox_id, limit=1, newest=True)
    assert list(nothing.messages) == []
    assert [
        m.text for m in (await alice.read(empty.inbox_id, after=nothing.next_cursor)).messages
    ] == []

    for kwargs in ({"after": newest.next_cursor}, {"wait_seconds": 1}):
        with pytest.raises(InvalidArgument, match="newest") as refused:
            await alice.read(receipt.inbox_id, newest=True, **kwargs)
        assert refused.value.metadata["rule"] == "read.newest"
    with pytest.raises(NotFound):
        await bob.read(receipt.inbox_id, newest=True)


async def test_the_agents_final_text_is_never_forwarded_only_explicit_messages_C6(clients, demo):
    """C6: only what the agent sends with the message tool reaches the inbox; silence is valid."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("are you there?", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    await bot.complete_turn(turn.turn_id)  # handled the turn and chose silence
    page = await alice.read(receipt.inbox_id)
    assert list(page.messages) == []

    # Later the agent answers in a new turn, started by a wake-up; still explicit.
    await bot.send_message(receipt.inbox_id, "late answer")
    page = await alice.read(receipt.inbox_id)
    assert [m.text for m in page.messages] == ["late answer"]


async def test_only_the_targets_agents_may_reply_to_an_inbox_C6_A3(clients, demo, operator):
    """C6 A3: an agent of another crew cannot write into this conversation's inbox."""
    await operator.register_target("crew:other", owner="user:owner")
    alice = await clients("user:alice")
    intruder = await clients("agent:other/bot")
    receipt = await alice.send("hi", target=demo)
    with pytest.raises(NotFound):
        await intruder.send_message(receipt.inbox_id, "I am demo, trust me")
    with pytest.raises(PermissionDenied):
        await intruder.claim_turn([demo])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"after": "not-a-cursor"}, "is not a cursor"),
        ({"after": "cDE6LTU"}, "is not a cursor"),  # p1:-5
        ({"limit": 101}, "limit must be between 1 and 100"),
        ({"limit": -1}, "limit must be between 1 and 100"),
        ({"wait_seconds": 26}, "wait_seconds must be between 0 and 25"),
        ({"wait_seconds": -1}, "wait_seconds must be between 0 and 25"),
    ],
)
async def test_bad_read_arguments_are_refused_C7(clients, demo, kwargs, match):
    """C7: malformed cursors and out-of-range limit or wait_seconds -> INVALID_ARGUMENT."""
    alice = await clients("user:alice")
    receipt = await alice.send("x", target=demo)
    with pytest.raises(InvalidArgument, match=match):
        await alice.read(receipt.inbox_id, **kwargs)


async def test_long_poll_returns_when_a_message_lands_on_another_replica_C7_P3(
    clients, demo, start_messaging, identity
):
    """C7 P3: a reader waiting on replica B wakes when replica A stores a reply."""
    replica_b = await start_messaging()
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")  # talks to replica A
    receipt = await alice.send("ping", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)

    async with MessagingClient(replica_b.address, identity=identity("user:alice")) as reader:
        waiting = asyncio.create_task(reader.read(receipt.inbox_id, wait_seconds=20))
        await until(lambda: replica_b.database.listener.waiting >= 1)  # the reader is parked
        assert not waiting.done()
        sent_at = time.monotonic()
        await bot.send_message(turn.reply_inbox_id, "pong")
        page = await asyncio.wait_for(waiting, timeout=20)
        woke_after = time.monotonic() - sent_at
    assert [m.text for m in page.messages] == ["pong"]
    # Woken by NOTIFY, not by the 20 s deadline or the 5 s fallback poll.
    assert woke_after < 4.0


async def test_long_poll_ends_empty_at_its_deadline_C7(clients, demo):
    """C7: with nothing to read, a wait returns an empty page at the deadline."""
    alice = await clients("user:alice")
    receipt = await alice.send("anyone?", target=demo)
    started = time.monotonic()
    page = await alice.read(receipt.inbox_id, wait_seconds=1)
    assert list(page.messages) == []
    assert time.monotonic() - started >= 0.9


async def test_one_turn_per_conversation_at_a_time_C10(clients, demo):
    """C10: deliveries to one conversation are never in two turns at once."""
    alice = await clients("user:alice")
    bot1 = await clients("agent:demo/one")
    bot2 = await clients("agent:demo/two")
    receipt = await alice.send("first", target=demo)
    turn = await bot1.claim_turn([demo], wait_seconds=5)
    await alice.send("second", inbox_id=receipt.inbox_id)
    # The conversation is busy: nobody may start a second turn for it.
    assert await bot2.claim_turn([demo], wait_seconds=1) is None

    waiting = asyncio.create_task(bot2.claim_turn([demo], wait_seconds=10))
    await bot1.complete_turn(turn.turn_id)
    next_turn = await asyncio.wait_for(waiting, 15)
    assert next_turn is not None
    assert [d.message.text for d in next_turn.deliveries] == ["second"]


async def test_timer_and_message_arriving_together_are_one_serialized_turn_C10(clients, demo):
    """C10: a wake-up and a message queued together come as one batch in one turn."""
    alice = await clients("user:alice")
    scheduler = await clients("service:scheduler")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("question", target=demo)
    await scheduler.enqueue_delivery(
        receipt.conversation_id,
        kind=pb.DELIVERY_KIND_WAKE_UP,
        idempotency_key="wake:1",
        text="check again",
    )
    turn = await bot.claim_turn([demo], wait_seconds=5)
    kinds = [d.kind for d in turn.deliveries]
    assert kinds == [pb.DELIVERY_KIND_MESSAGE, pb.DELIVERY_KIND_WAKE_UP]
    assert await bot.claim_turn([demo]) is None


async def test_many_runtimes_never_hold_one_conversation_twice_C10_P3(
    clients, demo, start_messaging, identity
):
    """C10 P3: eight runtimes on two replicas claim 20 conversations, each exactly once."""
    alice = await clients("user:alice")
    for i in range(20):
        await alice.send(f"job {i}", target=demo)
    replica_b = await start_messaging()
    runtimes = [await clients(f"agent:demo/r{i}") for i in range(4)]
    runtimes += [
        MessagingClient(replica_b.address, identity=identity(f"agent:demo/s{i}")) for i in range(4)
    ]
    seen: list[str] = []

    async def work(client: MessagingClient) -> None:
        while (turn := await client.claim_turn([demo])) is not None:
            seen.extend(d.message.text for d in turn.deliveries)
            await client.complete_turn(turn.turn_id)

    await asyncio.gather(*(work(r) for r in runtimes))
    for r in runtimes[4:]:
        await r.close()
    assert sorted(seen) == sorted(f"job {i}" for i in range(20))


async def test_lost_lease_records_interrupted_and_never_resends_C11(clients, demo, database_url):
    """C11: a runtime that stops renewing its lease leaves the turn interrupted."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("do the thing", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5, lease_seconds=5)
    await bot.heartbeat_turn(turn.turn_id, lease_seconds=5)

    # The runtime "dies": no heartbeat. The sweeper records the turn interrupted.
    async def interrupted() -> pb.Delivery | None:
        transcript = await alice.get_transcript(receipt.conversation_id)
        delivery = transcript.entries[1].delivery
        return delivery if delivery.status == pb.DELIVERY_STATUS_INTERRUPTED else None

    delivery = await until(interrupted, 30, every=0.1, what="the turn is interrupted")
    assert delivery.turn_id == turn.turn_id

    # Not resent: no runtime gets the delivery again.
    assert await bot.claim_turn([demo], wait_seconds=1) is None
    with pytest.raises(PreconditionFailed, match="interrupted") as lost:
        await bot.complete_turn(turn.turn_id)
    # An interrupted turn is a lost lease to its runtime (the reason it branches on, P6).
    assert (lost.value.reason, lost.value.metadata) == (
        "LEASE_LOST",
        {"turn_id": turn.turn_id, "status": "interrupted"},
    )
    with pytest.raises(PreconditionFailed, match="interrupted"):
        await bot.heartbeat_turn(turn.turn_id)
    with psycopg.connect(database_url) as conn:
        status = conn.execute("SELECT status FROM messaging.turns").fetchall()
    assert status == [("interrupted",)]

    # The conversation goes on: a new message starts a new turn.
    await alice.send("are you back?", inbox_id=receipt.inbox_id)
    fresh = await bot.claim_turn([demo], wait_seconds=5)
    assert [d.message.text for d in fresh.deliveries] == ["are you back?"]


async def test_a_runtime_gives_a_turn_up_interrupted_and_a_retry_is_answered_alike_C11(
    clients, demo, database_url
):
    """C11: CompleteTurn `interrupted` records the turn and its deliveries interrupted at
    once, as a lapsed lease does, and frees the conversation. The same ending asked again
    (an answer lost on the way) succeeds and changes nothing; a different one is refused."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    other = await clients("agent:demo/other")
    receipt = await alice.send("do the thing", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5, lease_seconds=300)

    with pytest.raises(NotFound):  # only the runtime holding the turn may end it
        await other.complete_turn(turn.turn_id, interrupted=True)
    await bot.complete_turn(turn.turn_id, interrupted=True)
    await bot.complete_turn(turn.turn_id, interrupted=True)
    with pytest.raises(PreconditionFailed, match="interrupted") as lost:
        await bot.complete_turn(turn.turn_id)
    # An interrupted turn is a lost lease to its runtime (the reason it branches on, P6).
    assert (lost.value.reason, lost.value.metadata) == (
        "LEASE_LOST",
        {"turn_id": turn.turn_id, "status": "interrupted"},
    )
    with pytest.raises(PreconditionFailed, match="interrupted"):
        await bot.heartbeat_turn(turn.turn_id)

    transcript = await alice.get_transcript(receipt.conversation_id)
    assert transcript.entries[1].delivery.status == pb.DELIVERY_STATUS_INTERRUPTED
    with psycopg.connect(database_url) as conn:
        status = conn.execute("SELECT status FROM messaging.turns").fetchall()
    assert status == [("interrupted",)]
    await alice.send("again", inbox_id=receipt.inbox_id)
    fresh = await bot.claim_turn([demo], wait_seconds=5)
    assert [d.message.text for d in fresh.deliveries] == ["again"]

    # And a handled turn completed twice (the first answer lost) is fine too.
    await bot.complete_turn(fresh.turn_id)
    await bot.complete_turn(fresh.turn_id)
    with pytest.raises(PreconditionFailed, match="already completed") as ended:
        await bot.complete_turn(fresh.turn_id, interrupted=True)
    assert (ended.value.reason, ended.value.metadata) == (
        "TURN_ENDED",
        {"turn_id": fresh.turn_id, "status": "completed"},
    )


async def test_transcript_pages_messages_and_deliveries_for_participants_C12(clients, demo):
    """C12: participants page the transcript by cursor; others see nothing."""
    alice = await clients("user:alice")
    owner = await clients("user:owner")
    bot = await clients("agent:demo/bot")
    stranger = await clients("user:mallory")
    receipt = await alice.send("one", target=demo)
    await reply_all(bot, demo, ["reply one"])
    await alice.send("two", inbox_id=receipt.inbox_id)

    entries = []
    cursor = ""
    while True:
        page = await owner.get_transcript(receipt.conversation_id, after=cursor, limit=2)
        if not page.entries:
            break
        entries.extend(page.entries)
        cursor = page.next_cursor
    described = [
        e.message.text if e.WhichOneof("entry") == "message" else f"delivery:{e.delivery.status}"
        for e in entries
    ]
    assert described == [
        "one",
        f"delivery:{pb.DELIVERY_STATUS_HANDLED}",
        "reply one",
        "two",
        f"delivery:{pb.DELIVERY_STATUS_PENDING}",
    ]
    assert entries[1].delivery.message.text == "one"  # a delivery carries its message
    head = await owner.get_transcript(receipt.conversation_id, limit=1)
    assert (head.target.name, head.inbox_id) == ("demo", receipt.inbox_id)
    assert (await bot.get_transcript(receipt.conversation_id)).entries
    with pytest.raises(NotFound):
        await stranger.get_transcript(receipt.conversation_id)

    # The newest entries, oldest first, in one request (B1: a turn's memory), with the
    # cursor after them; not with `after`; the same access rule.
    tail = await bot.get_transcript(receipt.conversation_id, limit=3, newest=True)
    assert [MessageToDict(e) for e in tail.entries] == [MessageToDict(e) for e in entries[-3:]]
    assert tail.next_cursor == cursor
    whole = await alice.get_transcript(inbox_id=receipt.inbox_id, limit=200, newest=True)
    assert [MessageToDict(e) for e in whole.entries] == [MessageToDict(e) for e in entries]
    with pytest.raises(InvalidArgument, match="newest"):
        await owner.get_transcript(receipt.conversation_id, after=cursor, newest=True)
    with pytest.raises(NotFound):
        await stranger.get_transcript(receipt.conversation_id, newest=True)


async def test_enqueue_delivery_is_idempotent_and_for_services_only_S6_F13(
    clients, demo, database_url
):
    """S6 F13: one delivery per idempotency key; only platform services may enqueue."""
    alice = await clients("user:alice")
    functions = await clients("service:functions")
    receipt = await alice.send("start", target=demo)
    results = await asyncio.gather(
        *(
            functions.enqueue_delivery(
                receipt.conversation_id,
                kind=pb.DELIVERY_KIND_FUNCTION_COMPLETED,
                idempotency_key="call:abc:done",
                text="call abc completed",
                attributes={"call_id": "abc", "status": "completed"},
            )
            for _ in range(10)
        )
    )
    assert len({r.delivery_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    with psycopg.connect(database_url) as conn:
        n = conn.execute(
            "SELECT count(*) FROM messaging.deliveries WHERE kind = 'function_completed'"
        ).fetchone()
    assert n == (1,)
    with pytest.raises(PermissionDenied):
        await alice.enqueue_delivery(
            receipt.conversation_id, kind=pb.DELIVERY_KIND_WAKE_UP, idempotency_key="x"
        )
    with pytest.raises(InvalidArgument, match="idempotency_key is required"):
        await functions.enqueue_delivery(
            receipt.conversation_id, kind=pb.DELIVERY_KIND_WAKE_UP, idempotency_key=""
        )
    with pytest.raises(NotFound):
        await functions.enqueue_delivery(
            "00000000-0000-0000-0000-000000000000",
            kind=pb.DELIVERY_KIND_WAKE_UP,
            idempotency_key="y",
        )


async def test_webhook_payload_bytes_reach_the_turn_unchanged_S5(clients, demo):
    """S5: a raw payload is delivered byte-for-byte into the turn."""
    alice = await clients("user:alice")
    scheduler = await clients("service:scheduler")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("watch the repo", target=demo)
    await reply_all(bot, demo, [])
    raw = b'{"event": "push"}\x00\xff\n'
    await scheduler.enqueue_delivery(
        receipt.conversation_id, kind=pb.DELIVERY_KIND_WEBHOOK, idempotency_key="wh:1", payload=raw
    )
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn.deliveries[0].payload == raw


async def test_a_claim_over_several_targets_takes_their_oldest_waiting_conversation_C10(
    clients, operator
):
    """C10: a runtime serving several targets (crews and a workflow) claims their waiting
    conversations oldest first, one turn each, and never one of a target it did not name."""
    for ref in ("crew:one", "crew:two", "workflow:three", "crew:other"):
        await operator.register_target(ref, owner="user:owner")
    alice = await clients("user:alice")
    for ref in ("crew:two", "crew:other", "workflow:three", "crew:one"):
        await alice.send(f"to {ref}", target=ref)
    runtime = await clients("service:runner", {"runtime"})
    named = ["crew:one", "crew:two", "workflow:three"]
    seen: list[str] = []
    while (turn := await runtime.claim_turn(named)) is not None:
        seen.append(turn.deliveries[0].message.text)
        await runtime.complete_turn(turn.turn_id)
    assert seen == ["to crew:two", "to workflow:three", "to crew:one"]
    other = await runtime.claim_turn(["crew:other"])
    assert other is not None and other.deliveries[0].message.text == "to crew:other"
