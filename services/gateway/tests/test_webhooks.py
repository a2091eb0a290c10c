"""`POST /webhooks/<webhook_id>` on the gateway (G4, S5): no bearer token, the HMAC
signature is the authentication; the scheduler checks it and delivers the raw body."""

from __future__ import annotations

import time
import uuid

import pytest

from agentworks.client.messaging import attributes_json
from agentworks.client.scheduler import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signed_webhook_headers,
    webhook_signature,
)
from agentworks.messaging.v1 import messaging_pb2 as m


@pytest.fixture
def scheduler_address(scheduler) -> str:
    """The gateways of these tests talk to the in-process scheduler."""
    return scheduler.address


# Not UTF-8, with a NUL and a trailing newline: it must arrive byte for byte.
BODY = b'{"event": "deploy", "status": "ok"}\n\x00\xff\xc3\x28 raw\r\n'


async def _webhook(api, operator_token: str, conversation: str) -> dict:
    created = await api(operator_token).post(
        "/api/v1/tools/webhooks",
        json={"action": "create", "conversation_id": conversation, "name": "ci"},
    )
    assert created.status_code == 200, created.text
    hook = created.json()
    assert hook["secret"].startswith("whsec_")
    assert hook["path"] == f"/webhooks/{hook['webhook_id']}"
    return hook


async def test_a_signed_webhook_is_delivered_byte_for_byte_without_a_token_G4_S5(
    gateway, api, operator_token, scheduler, conversation, bot, demo
):
    """G4 S5: a correctly signed POST answers 202 with the delivery id; the agent's next turn
    carries the raw body unchanged, as a webhook delivery."""
    hook = await _webhook(api, operator_token, conversation)
    headers = {
        **signed_webhook_headers(hook["secret"], BODY, delivery_id="evt-1"),
        "Content-Type": "application/octet-stream",
    }
    response = await api(None).post(hook["path"], content=BODY, headers=headers)
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["created"] is True and accepted["delivery_id"]

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None and turn.conversation_id == conversation
    (delivery,) = turn.deliveries
    assert delivery.delivery_id == accepted["delivery_id"]
    assert delivery.kind == m.DELIVERY_KIND_WEBHOOK
    assert delivery.payload == BODY
    attributes = attributes_json(delivery)
    assert attributes["webhook_id"] == hook["webhook_id"] and attributes["delivery"] == "evt-1"
    assert attributes["content_type"] == "application/octet-stream"
    await bot.complete_turn(turn.turn_id)


async def test_bad_stale_replayed_unknown_and_oversize_webhooks_are_refused_S5_G4_P6(
    gateway, api, operator_token, scheduler, conversation, bot, demo
):
    """S5 G4 P6: 401 for a missing or wrong signature and a stale timestamp, 400 for a
    malformed one, 404 for an unknown webhook, 409 for a replay, 413 above the size limit;
    each error carries the scheduler's text, and only the one good event is delivered."""
    hook = await _webhook(api, operator_token, conversation)
    outside = api(None)

    async def post(headers: dict[str, str], body: bytes = BODY, path: str = hook["path"]):
        response = await outside.post(path, content=body, headers=headers)
        error = response.json().get("error", {}) if response.status_code != 202 else {}
        return response.status_code, error.get("code"), error.get("message", "")

    status, code, text = await post({})
    assert (status, code) == (401, "UNAUTHENTICATED") and "webhook request is not signed" in text

    wrong = signed_webhook_headers("whsec_not-the-secret", BODY)
    status, code, text = await post(wrong)
    assert (status, code) == (401, "UNAUTHENTICATED")
    assert text.startswith("webhook signature does not match")

    stale = signed_webhook_headers(hook["secret"], BODY, timestamp=int(time.time()) - 3600)
    status, code, text = await post(stale)
    assert (status, code) == (401, "UNAUTHENTICATED")
    assert "s old; the tolerance is 300 s" in text

    malformed = {
        TIMESTAMP_HEADER: "soon",
        SIGNATURE_HEADER: webhook_signature(hook["secret"], "soon", BODY),
    }
    status, code, text = await post(malformed)
    assert (status, code) == (400, "INVALID_ARGUMENT") and "must be Unix seconds" in text

    unknown = f"/webhooks/{uuid.uuid4()}"
    status, code, text = await post(signed_webhook_headers(hook["secret"], BODY), path=unknown)
    assert (status, code) == (404, "NOT_FOUND") and "not found" in text

    too_big = b"x" * (gateway.gateway.config.webhook_max_body_bytes + 1)
    status, code, text = await post(signed_webhook_headers(hook["secret"], too_big), too_big)
    assert (status, code) == (413, "INVALID_ARGUMENT")
    assert "larger than 262144 bytes" in text

    good = signed_webhook_headers(hook["secret"], BODY, delivery_id="evt-2")
    assert (await post(good))[0] == 202
    status, code, text = await post(good)
    assert (status, code) == (409, "ALREADY_EXISTS"), text

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert [d.payload for d in turn.deliveries] == [BODY]
    await bot.complete_turn(turn.turn_id)
    assert await bot.claim_turn([demo], wait_seconds=0) is None
