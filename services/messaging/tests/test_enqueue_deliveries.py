"""EnqueueDeliveries: many deliveries in one request, each succeeding or failing alone (S6)."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest

from agentworks.client import delivery_request
from agentworks.core.errors import Conflict, InvalidArgument, NotFound, PermissionDenied, Reason
from agentworks.core.limits import MAX_DELIVERIES_PER_REQUEST
from agentworks.messaging.v1 import messaging_pb2 as pb

WAKE_UP = pb.DELIVERY_KIND_WAKE_UP


def stored(database_url: str, conversation_id: str) -> list[tuple[int, str, str]]:
    """(position, kind, idempotency key) of a conversation's deliveries, in order."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT position, kind, coalesce(idempotency_key, '') FROM messaging.deliveries "
            "WHERE conversation_id = %s ORDER BY position",
            (conversation_id,),
        ).fetchall()


async def test_each_item_gets_its_own_outcome_and_a_refused_item_stores_nothing_S6(
    clients, demo, database_url
):
    """S6: one request, one result per item in order; refusals store nothing of theirs."""
    alice = await clients("user:alice")
    scheduler = await clients("service:scheduler")
    bot = await clients("agent:demo/bot")
    a = (await alice.send("first", target=demo)).conversation_id
    b = (await alice.send("second", target=demo)).conversation_id
    earlier = await scheduler.enqueue_delivery(a, kind=WAKE_UP, idempotency_key="k-earlier")

    results = await scheduler.enqueue_deliveries(
        [
            delivery_request(a, kind=WAKE_UP, idempotency_key="k-a1", text="a one"),
            delivery_request(b, kind=WAKE_UP, idempotency_key="k-b1", text="b one"),
            delivery_request(a, kind=WAKE_UP, idempotency_key="k-earlier"),  # delivered before
            delivery_request(str(uuid.uuid4()), kind=WAKE_UP, idempotency_key="k-nowhere"),
            delivery_request("not-a-uuid", kind=WAKE_UP, idempotency_key="k-bad-id"),
            delivery_request(a, kind=pb.DELIVERY_KIND_MESSAGE, idempotency_key="k-kind"),
            delivery_request(a, kind=WAKE_UP, idempotency_key="k-nul", text="a\x00b"),
            delivery_request(b, kind=WAKE_UP, idempotency_key="k-b1"),  # twice in the request
            delivery_request(b, kind=WAKE_UP, idempotency_key="k-b2", text="b two"),
            delivery_request(
                a, kind=pb.DELIVERY_KIND_WEBHOOK, idempotency_key="k-a2", payload=b"\x00\xff"
            ),
        ]
    )

    assert len(results) == 10
    a1, b1, again, nowhere, bad_id, kind, nul, twice, b2, a2 = results
    for fresh in (a1, b1, b2, a2):
        assert isinstance(fresh, pb.EnqueueDeliveryResponse) and fresh.created
    assert (again.delivery_id, again.created) == (earlier.delivery_id, False)
    assert isinstance(nowhere, NotFound) and isinstance(bad_id, NotFound)
    assert isinstance(kind, InvalidArgument) and "kind must be one of" in kind.message
    assert isinstance(nul, InvalidArgument) and "NUL" in nul.message
    assert isinstance(twice, InvalidArgument) and "appears twice" in twice.message

    [other] = await scheduler.enqueue_deliveries(
        [delivery_request(b, kind=WAKE_UP, idempotency_key="k-earlier")]
    )
    assert isinstance(other, Conflict) and "another conversation" in other.message
    for changed in (
        delivery_request(a, kind=WAKE_UP, idempotency_key="k-a1", text="a changed"),
        delivery_request(a, kind=pb.DELIVERY_KIND_SCHEDULE, idempotency_key="k-a1", text="a one"),
        delivery_request(a, kind=pb.DELIVERY_KIND_WEBHOOK, idempotency_key="k-a2"),
    ):
        [refused] = await scheduler.enqueue_deliveries([changed])
        assert isinstance(refused, Conflict) and "different content" in refused.message
    # A retry repeats the content; its attributes (lateness, say) may differ.
    [retry] = await scheduler.enqueue_deliveries(
        [
            delivery_request(
                a, kind=WAKE_UP, idempotency_key="k-a1", text="a one", attributes={"late": True}
            )
        ]
    )
    assert (retry.delivery_id, retry.created) == (a1.delivery_id, False)

    # Positions follow the request's order within each conversation; nothing refused is
    # stored. Position 1 is the opening message, 2 its delivery.
    assert stored(database_url, a) == [
        (2, "message", ""),
        (3, "wake_up", "k-earlier"),
        (4, "wake_up", "k-a1"),
        (5, "webhook", "k-a2"),
    ]
    assert stored(database_url, b) == [
        (2, "message", ""),
        (3, "wake_up", "k-b1"),
        (4, "wake_up", "k-b2"),
    ]

    # The turn queue has them, in order, with their text and payload (C10).
    seen: dict[str, list[tuple[str, bytes]]] = {}
    for _ in range(2):
        turn = await bot.claim_turn([demo], wait_seconds=5)
        assert turn is not None
        seen[turn.conversation_id] = [
            (d.text or d.message.text, d.payload) for d in turn.deliveries
        ]
        await bot.complete_turn(turn.turn_id)
    assert seen[a] == [("first", b""), ("", b""), ("a one", b""), ("", b"\x00\xff")]
    assert seen[b] == [("second", b""), ("b one", b""), ("b two", b"")]


async def test_the_request_is_for_services_and_holds_1_to_500_items_S6(clients, demo):
    """S6: only platform services may enqueue; an empty or oversized request is refused whole."""
    alice = await clients("user:alice")
    functions = await clients("service:functions")
    conversation = (await alice.send("hi", target=demo)).conversation_id
    one = [delivery_request(conversation, kind=WAKE_UP, idempotency_key="k")]
    with pytest.raises(PermissionDenied):
        await alice.enqueue_deliveries(one)
    # The count is the proto's rule (1 to MAX_DELIVERIES_PER_REQUEST items).
    with pytest.raises(InvalidArgument) as refused:
        await functions.enqueue_deliveries([])
    assert (refused.value.reason, refused.value.metadata) == (
        Reason.FIELD_RULE,
        {"field": "items", "rule": "repeated.min_items", "limit": "1"},
    )
    too_many = [
        delivery_request(conversation, kind=WAKE_UP, idempotency_key=f"k{n}")
        for n in range(MAX_DELIVERIES_PER_REQUEST + 1)
    ]
    with pytest.raises(InvalidArgument) as refused:
        await functions.enqueue_deliveries(too_many)
    assert (refused.value.reason, refused.value.metadata) == (
        Reason.FIELD_RULE,
        {"field": "items", "rule": "repeated.max_items", "limit": str(MAX_DELIVERIES_PER_REQUEST)},
    )
    stored = await functions.enqueue_deliveries(too_many[:-1])
    assert [r.created for r in stored] == [True] * MAX_DELIVERIES_PER_REQUEST


async def test_concurrent_overlapping_requests_store_each_key_once_S6(clients, demo, database_url):
    """S6: requests racing over the same keys and conversations, in opposite orders, keep
    one delivery per key and consecutive positions; none fails."""
    alice = await clients("user:alice")
    scheduler = await clients("service:scheduler")
    conversations = [(await alice.send(f"c{i}", target=demo)).conversation_id for i in range(6)]
    items = [
        delivery_request(c, kind=WAKE_UP, idempotency_key=f"race:{c}:{n}")
        for c in conversations
        for n in range(3)
    ]
    orders = [items, items[::-1]] * 4
    # Hold every conversation's row lock so that all requests start, take their
    # snapshots and queue on the locks; when it is released they race for the keys.
    with psycopg.connect(database_url) as holder:
        holder.execute(
            "SELECT 1 FROM messaging.conversations WHERE id = ANY(%s) FOR UPDATE",
            (conversations,),
        )
        racing = [asyncio.create_task(scheduler.enqueue_deliveries(o)) for o in orders]
        # A second for all 8 to start: those past the pool wait on the locks, the rest for
        # a pooled connection, which nothing outside the service shows to wait on.
        await asyncio.sleep(1.0)
        assert not any(task.done() for task in racing)
    results = await asyncio.gather(*racing)

    by_key: dict[str, set[str]] = {}
    for order, outcome in zip(orders, results, strict=True):
        for item, result in zip(order, outcome, strict=True):
            assert isinstance(result, pb.EnqueueDeliveryResponse), result
            by_key.setdefault(item.idempotency_key, set()).add(result.delivery_id)
    assert all(len(ids) == 1 for ids in by_key.values())
    created = sum(r.created for outcome in results for r in outcome)
    assert created == len(items)
    for c in conversations:
        rows = stored(database_url, c)
        assert [p for p, _, _ in rows] == [2, 3, 4, 5]


async def test_attributes_postgresql_cannot_store_refuse_only_their_item_P6(
    clients, demo, database_url
):
    """P6: NaN/Infinity or NUL in one item's attributes refuses that item, not the request."""
    alice = await clients("user:alice")
    scheduler = await clients("service:scheduler")
    conversation = (await alice.send("hi", target=demo)).conversation_id
    results = await scheduler.enqueue_deliveries(
        [
            pb.EnqueueDeliveryRequest(  # what a client that writes Python's JSON sends
                conversation_id=conversation,
                kind=WAKE_UP,
                idempotency_key="inf",
                attributes_json='{"x": Infinity}',
            ),
            delivery_request(
                conversation, kind=WAKE_UP, idempotency_key="nul", attributes={"k\x00": 1}
            ),
            delivery_request(conversation, kind=WAKE_UP, idempotency_key="ok", attributes={"x": 1}),
        ]
    )
    inf, nul, ok = results
    assert isinstance(inf, InvalidArgument) and "attributes" in inf.message
    assert isinstance(nul, InvalidArgument) and "attributes" in nul.message
    assert ok.created
    assert [key for _, _, key in stored(database_url, conversation)] == ["", "ok"]
