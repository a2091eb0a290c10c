"""Webhooks: signed events delivered byte-for-byte; every bad request refused (S5, P6)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentworks.client.messaging import attributes_json
from agentworks.client.scheduler import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signed_webhook_headers,
    webhook_signature,
)
from agentworks.core.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from agentworks.messaging.v1 import messaging_pb2 as m

BOT = "agent:demo/bot"
LIMIT = 256 * 1024


@pytest.fixture
async def ops(clients):
    return await clients.scheduler("user:ops", {"operator"})


@pytest.fixture
async def gateway(clients):
    """The gateway hands HTTP requests over with its service identity."""
    return await clients.scheduler("service:gateway")


@pytest.fixture
async def hook(ops, conversation):
    return await ops.create_webhook(conversation, name="ci", product="crew:demo")


async def test_signed_event_is_delivered_byte_for_byte_S5(
    ops, gateway, hook, bot, demo, conversation
):
    """S5: a correctly signed event reaches the conversation with its exact raw bytes."""
    assert hook.secret.startswith("whsec_") and len(hook.secret_fingerprint) == 12
    assert (await ops.get_webhook(hook.webhook_id)).secret == ""  # shown once
    body = b'{"event": "push"}\r\n\x00\xff\xfe not utf-8 \xe2\x82  trailing  '
    headers = {
        k.lower(): v
        for k, v in signed_webhook_headers(hook.secret, body, delivery_id="e-1").items()
    }
    headers["Content-Type"] = "application/octet-stream"

    result = await gateway.receive_webhook(hook.webhook_id, headers=headers, body=body)
    assert result.created and result.delivery_id

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn.conversation_id == conversation
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_WEBHOOK]
    delivery = turn.deliveries[0]
    assert delivery.payload == body
    assert delivery.delivery_id == result.delivery_id
    assert attributes_json(delivery)["delivery"] == "e-1"
    assert attributes_json(delivery)["webhook_id"] == hook.webhook_id
    assert attributes_json(delivery)["content_type"] == "application/octet-stream"
    await bot.complete_turn(turn.turn_id)


async def test_bad_signatures_stale_times_replays_and_big_bodies_are_refused_S5_P6(
    ops, gateway, hook, conversation, deliveries
):
    """S5 P6: each refusal names what was wrong; none of them delivers anything."""
    body = b'{"n": 1}'
    now = int(time.time())

    def signed(**kwargs) -> dict[str, str]:
        return signed_webhook_headers(hook.secret, body, **kwargs)

    async def receive(headers: dict[str, str], payload: bytes = body, webhook_id: str = ""):
        return await gateway.receive_webhook(
            webhook_id or hook.webhook_id, headers=headers, body=payload
        )

    wrong_key = signed()
    wrong_key[SIGNATURE_HEADER] = webhook_signature(
        "whsec_wrong", wrong_key[TIMESTAMP_HEADER], body
    )
    other_body = signed()
    unsigned = signed()
    del unsigned[SIGNATURE_HEADER]
    cases = [
        (wrong_key, body, Unauthenticated, "signature does not match"),
        (other_body, b'{"n": 2}', Unauthenticated, "signature does not match"),
        (unsigned, body, Unauthenticated, "not signed"),
        # 301 s old when signed; a second or two more by the time it is checked.
        (signed(timestamp=now - 301), body, Unauthenticated, r"30\d s old; the tolerance is 300"),
        (signed(timestamp=now + 400), body, Unauthenticated, "in the future"),
        ({**signed(), TIMESTAMP_HEADER: "yesterday"}, body, InvalidArgument, "Unix seconds"),
        (
            {k: v for k, v in signed().items() if k != DELIVERY_HEADER},
            body,
            InvalidArgument,
            f"{DELIVERY_HEADER} is required",
        ),
    ]
    for headers, payload, error, message in cases:
        with pytest.raises(error, match=message):
            await receive(headers, payload)
    big = b"x" * (LIMIT + 1)
    with pytest.raises(InvalidArgument, match=f"{LIMIT + 1} bytes; the limit is {LIMIT}"):
        await receive(signed_webhook_headers(hook.secret, big), big)
    with pytest.raises(PermissionDenied, match="gateway"):
        await ops.receive_webhook(hook.webhook_id, headers=signed(), body=body)
    with pytest.raises(NotFound):
        await receive(signed(), webhook_id="6c1f3c52-0000-4000-8000-000000000000")
    assert await deliveries(conversation, "webhook") == []

    first = signed(delivery_id="d-1")
    await receive(first)
    with pytest.raises(Conflict, match="delivery 'd-1' was already received"):
        await receive(first)
    with pytest.raises(Conflict, match=r"this signature \(delivery 'd-1'\)"):
        await receive({**first, DELIVERY_HEADER: "d-2"})
    with pytest.raises(Conflict, match="delivery 'd-1' was already received"):
        await receive(signed(delivery_id="d-1", timestamp=now - 1))
    assert len(await deliveries(conversation, "webhook")) == 1

    rotated = await ops.rotate_webhook_secret(hook.webhook_id)
    assert rotated.secret and rotated.secret != hook.secret
    assert rotated.secret_fingerprint != hook.secret_fingerprint
    with pytest.raises(Unauthenticated, match="signature does not match"):
        await receive(signed(delivery_id="d-3"))
    await receive(signed_webhook_headers(rotated.secret, body, delivery_id="d-3"))
    keys = [row[0] for row in await deliveries(conversation, "webhook")]
    assert keys == [f"webhook:{hook.webhook_id}:d-1", f"webhook:{hook.webhook_id}:d-3"]


async def test_webhooks_belong_to_their_creator_and_the_conversations_agents_S5_A3(
    clients, ops, hook, conversation
):
    """S5 A3: agents attach webhooks to their conversation; others cannot see or change them."""
    sched = await clients.scheduler(BOT)
    own = await sched.create_webhook(conversation, name="bot's hook")
    assert own.product == "crew:demo" and own.secret
    assert [h.webhook_id for h in (await sched.list_webhooks()).webhooks] == [own.webhook_id]
    listed = await ops.list_webhooks(conversation_id=conversation)
    assert {h.webhook_id for h in listed.webhooks} == {hook.webhook_id, own.webhook_id}
    assert all(h.secret == "" for h in listed.webhooks)

    stranger = await clients.scheduler("agent:other/bot")
    with pytest.raises(NotFound):
        await stranger.create_webhook(conversation)
    with pytest.raises(NotFound):
        await stranger.rotate_webhook_secret(own.webhook_id)
    with pytest.raises(NotFound):
        await sched.get_webhook(hook.webhook_id)  # the operator's
    await sched.delete_webhook(own.webhook_id)
    with pytest.raises(NotFound):
        await ops.get_webhook(own.webhook_id)


async def test_a_retried_create_gets_the_same_webhook_and_secret_while_safe_S5_S6(
    clients, ops, conversation, gateway, sql
):
    """S5 S6: the same CreateWebhook with the same submission_id makes one webhook; the
    retry gives its creator the same, working secret (within 24 hours and until a rotate;
    then the retry answers without it); the key with another request is refused."""
    sched = await clients.scheduler(BOT)
    twins = await asyncio.gather(
        *(sched.create_webhook(conversation, name="ci", submission_id="h-1") for _ in range(6))
    )
    assert len({h.webhook_id for h in twins}) == 1
    assert len({h.secret for h in twins}) == 1 and twins[0].secret.startswith("whsec_")
    assert await sql("SELECT count(*) FROM scheduler.webhooks") == [(1,)]
    with pytest.raises(Conflict, match="submission_id 'h-1' was already used for a different"):
        await sched.create_webhook(conversation, name="other", submission_id="h-1")

    body = b"{}"
    headers = signed_webhook_headers(twins[0].secret, body)
    assert (await gateway.receive_webhook(twins[0].webhook_id, headers=headers, body=body)).created

    await sql(
        "UPDATE scheduler.webhooks SET created_at = now() - interval '25 hours' WHERE id = %s",
        twins[0].webhook_id,
    )
    late = await sched.create_webhook(conversation, name="ci", submission_id="h-1")
    assert late.webhook_id == twins[0].webhook_id and late.secret == ""
    await sql("UPDATE scheduler.webhooks SET created_at = now() WHERE id = %s", late.webhook_id)
    rotated = await ops.rotate_webhook_secret(late.webhook_id)
    after_rotate = await sched.create_webhook(conversation, name="ci", submission_id="h-1")
    assert after_rotate.secret == "" and rotated.secret != twins[0].secret


async def test_copies_of_one_event_arriving_at_once_deliver_it_once_S5(
    gateway, hook, conversation, deliveries, sql
):
    """S5: six copies of one signed event at the same moment (and one with another
    delivery id but the same signature): one is delivered, every other one is refused
    as a replay, and the replay window holds the one receipt with its delivery id."""
    body = b'{"at": "once"}'
    headers = signed_webhook_headers(hook.secret, body)
    renamed = {**headers, DELIVERY_HEADER: headers[DELIVERY_HEADER] + "-copy"}
    results = await asyncio.gather(
        *(
            gateway.receive_webhook(hook.webhook_id, headers=h, body=body)
            for h in [headers] * 6 + [renamed]
        ),
        return_exceptions=True,
    )
    delivered = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(delivered) == 1 and delivered[0].created
    assert len(refused) == 6 and all(isinstance(r, Conflict) for r in refused)
    assert all(isinstance(r, Conflict) and "replayed webhook event" in r.message for r in refused)
    assert {r.reason for r in refused if isinstance(r, Conflict)} == {"REPLAYED"}
    assert len(await deliveries(conversation, "webhook")) == 1
    assert await sql("SELECT count(*), count(delivery_id) FROM scheduler.webhook_receipts") == [
        (1, 1)
    ]
