"""Webhooks out end to end (N2): events from the services' streams reach a receiver,
signed (verified with the `standardwebhooks` package), each under one stable id; a
receiver that is down sees every event once it is up again; listings show failing then
delivered; redeliver; another tenant cannot list or redeliver (A3)."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
from standardwebhooks import Webhook

from agentworks.client import MessagingClient
from agentworks.server.testing.waiting import until
from tests.fixtures.webhook_receiver import Received, Receiver

# Retries every 0.2-0.5 s instead of 5 s to an hour, so "down for a while" takes seconds.
FAST = {
    "GATEWAY_WEBHOOKS_ALLOW": "127.0.0.1/32",
    "GATEWAY_WEBHOOKS_FIRST_RETRY_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_MAX_RETRY_INTERVAL_SECONDS": "0.5",
    "GATEWAY_WEBHOOKS_POLL_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_LEASE_SECONDS": "2",
}


# How much longer the receiver stays down in the call-ends test (the minute:
# AGENTWORKS_WEBHOOKS_DOWN_SECONDS=60; the suite does not wait).
DOWN_SECONDS = float(os.environ.get("AGENTWORKS_WEBHOOKS_DOWN_SECONDS", "0"))


@pytest.fixture
async def gateway(start_gateway):
    """Every replica of a test has the same webhooks settings (any of them may send)."""
    return await start_gateway(**FAST)


@pytest.fixture
async def receiver():
    hook = await Receiver().start()
    yield hook
    await hook.stop()


async def _tool(client: Any, **args: Any) -> tuple[int, dict[str, Any]]:
    response = await client.post("/api/v1/tools/endpoints", json=args)
    return response.status_code, response.json()


def _verified(secret: str, requests: list[Received]) -> list[tuple[str, dict[str, Any]]]:
    """(webhook-id, event) of each request, each verified with the secret."""
    return [(r.headers["webhook-id"], Webhook(secret).verify(r.body, r.headers)) for r in requests]


async def _deliveries(client: Any, endpoint_id: str, **args: Any) -> list[dict[str, Any]]:
    status, body = await _tool(client, action="deliveries", endpoint_id=endpoint_id, **args)
    assert status == 200, body
    return body["deliveries"]


async def _inbox(api: Callable, token: str) -> str:
    sent = await api(token).post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hello"}
    )
    assert sent.status_code == 200, sent.text
    return str(sent.json()["inbox_id"])


async def _reply(bot: Any, demo: str, inbox_id: str, *texts: str) -> None:
    """The demo agent's turn: each text a reply into the inbox."""
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    for i, text in enumerate(texts):
        last = i == len(texts) - 1
        await bot.send_message(inbox_id, text, complete_turn_id=turn.turn_id if last else "")


async def test_an_inbox_s_new_replies_arrive_signed_and_history_does_not_N2(
    gateway, api, alice_token, demo, bot, receiver
):
    """N2: after registering for inbox:<id>, each new reply in the inbox is posted as
    message.created, signed so the standardwebhooks verifier accepts it; the reply that
    came before registering is not; the listing shows the deliveries delivered."""
    alice = api(alice_token)
    inbox_id = await _inbox(api, alice_token)
    await _reply(bot, demo, inbox_id, "early")  # before the endpoint: never posted
    status, made = await _tool(
        alice, action="register", url=receiver.url, events=[f"inbox:{inbox_id}"]
    )
    assert status == 200, made

    sent = await alice.post(
        "/api/v1/tools/messages",
        json={"action": "send", "inbox_id": inbox_id, "message": "and then?"},
    )
    assert sent.status_code == 200, sent.text
    await _reply(bot, demo, inbox_id, "the answer", "and more")
    got = _verified(made["secret"], await receiver.wait_for(2))
    events = [event for _, event in got]
    assert [e["type"] for e in events] == ["message.created", "message.created"]
    assert [e["data"]["text"] for e in events] == ["the answer", "and more"]
    assert all(e["data"]["inbox_id"] == inbox_id for e in events)
    assert all(e["data"]["sender"] == "agent:demo/bot" for e in events)
    assert len({wid for wid, _ in got}) == 2 and all(w.startswith("msg_") for w, _ in got)

    async def all_delivered() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"])
        return len(listed) == 2 and all(d["status"] == "delivered" for d in listed)

    await until(all_delivered, timeout=10, what="both deliveries recorded as delivered")
    listed = await _deliveries(alice, made["endpoint_id"])
    assert {d["delivery_id"] for d in listed} == {wid for wid, _ in got}
    assert all(d["attempts"] == 1 and d["last_status"] == 200 for d in listed)
    assert len(receiver.requests) == 2


async def test_a_receiver_that_was_down_gets_every_event_once_per_id_N2_A3(
    gateway, api, alice_token, make_token, demo, bot, receiver
):
    """N2 A3: while the receiver is down the deliveries are listed failing with their
    error and next attempt; once it is up every event arrives, each under one id (by
    id: exactly once), and the listing turns delivered; redeliver sends one again under
    its id; bob can neither list nor redeliver alice's deliveries."""
    alice = api(alice_token, base_url=gateway.url)
    bob = api(await make_token("user:bob"), base_url=gateway.url)
    inbox_id = await _inbox(api, alice_token)
    made = (await _tool(alice, action="register", url=receiver.url, events=[f"inbox:{inbox_id}"]))[
        1
    ]
    await receiver.stop()  # down

    texts = [f"reply {i}" for i in range(5)]
    await _reply(bot, demo, inbox_id, *texts)

    async def failing_twice() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"])
        return len(listed) == 5 and all(
            d["status"] == "failing" and d["attempts"] >= 2 for d in listed
        )

    await until(failing_twice, timeout=15, what="five deliveries failing, retried")
    failing = await _deliveries(alice, made["endpoint_id"], status="failing")
    assert len(failing) == 5
    assert all(d["last_error"] and d["next_attempt_at"] for d in failing)
    assert any("Connect" in d["last_error"] or "refused" in d["last_error"] for d in failing)

    await receiver.start()  # up again, same port
    got = _verified(made["secret"], await receiver.wait_for(5))

    async def all_delivered() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"])
        return all(d["status"] == "delivered" for d in listed)

    await until(all_delivered, timeout=10, what="every delivery recorded as delivered")
    got = _verified(made["secret"], receiver.requests)
    by_id: dict[str, set[str]] = {}
    for wid, event in got:
        by_id.setdefault(wid, set()).add(event["data"]["message_id"])
    assert all(len(ids) == 1 for ids in by_id.values())  # one event per id
    message_ids = {event["data"]["message_id"] for _, event in got}
    assert len(by_id) == len(message_ids) == 5  # each event under one id, none lost
    assert sorted(event["data"]["text"] for _, event in got) == sorted(texts)

    # Redeliver: the same id and body again; another tenant cannot.
    first = next(iter(by_id))
    status, body = await _tool(bob, action="redeliver", delivery_id=first)
    assert status == 404 and body["error"]["reason"] == "NOT_FOUND", body
    status, body = await _tool(bob, action="deliveries", endpoint_id=made["endpoint_id"])
    assert status == 404 and body["error"]["reason"] == "NOT_FOUND", body
    seen = len(receiver.requests)
    status, body = await _tool(alice, action="redeliver", delivery_id=first)
    assert status == 200 and body["status"] == "pending", body
    again = await receiver.wait_for(seen + 1)
    assert again[-1].headers["webhook-id"] == first
    assert json.loads(again[-1].body) == dict(got)[first]


async def test_the_console_lists_deliveries_and_redelivers_one_N2_V4(
    gateway, api, alice_token, demo, bot, receiver
):
    """N2 V4: the console's Endpoints page shows the signed-in principal's endpoint and
    its delivery with its status; its Redeliver button (the console's Origin and CSRF
    token) sends the delivery again under its id."""
    alice = api(alice_token)
    inbox_id = await _inbox(api, alice_token)
    made = (await _tool(alice, action="register", url=receiver.url, events=[f"inbox:{inbox_id}"]))[
        1
    ]
    await _reply(bot, demo, inbox_id, "shown in the console")
    (first,) = await receiver.wait_for(1)
    delivery_id = first.headers["webhook-id"]
    await until(
        lambda: _deliveries(alice, made["endpoint_id"], status="delivered"),
        timeout=10,
        what="the delivery recorded as delivered",
    )

    http = api(None)
    signed = await http.post(
        "/console/sign-in", data={"token": alice_token}, headers={"Origin": gateway.url}
    )
    assert signed.status_code == 303, signed.text
    cookie = f"aw_console={signed.cookies['aw_console']}"
    http.cookies.clear()
    page = await http.get("/console/endpoints", headers={"Cookie": cookie})
    assert page.status_code == 200, page.text
    assert made["endpoint_id"] in page.text and receiver.url in page.text
    assert delivery_id in page.text and '<td data-testid="delivery-status">delivered' in page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    redone = await http.post(
        f"/console/deliveries/{delivery_id}/redeliver",
        data={"csrf": csrf[1]},
        headers={"Origin": gateway.url, "Cookie": cookie},
    )
    assert redone.status_code == 303, redone.text
    again = await receiver.wait_for(2)
    assert again[1].headers["webhook-id"] == delivery_id and again[1].body == first.body


async def test_two_replicas_never_send_one_delivery_twice_N2_P4(
    gateway, start_gateway, api, alice_token, demo, bot, receiver
):
    """N2 P4: with two gateway replicas following and sending (each claims due
    deliveries with SKIP LOCKED and a lease), twenty replies that all succeed at the
    first attempt reach the receiver once each: no webhook-id twice."""
    await start_gateway(**FAST)  # a second replica with the same settings
    alice = api(alice_token)
    inbox_id = await _inbox(api, alice_token)
    made = (await _tool(alice, action="register", url=receiver.url, events=[f"inbox:{inbox_id}"]))[
        1
    ]
    texts = [f"reply {i}" for i in range(20)]
    await _reply(bot, demo, inbox_id, *texts)
    await receiver.wait_for(20)

    async def all_delivered() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"], limit=50)
        return len(listed) == 20 and all(d["status"] == "delivered" for d in listed)

    await until(all_delivered, timeout=15, what="twenty deliveries recorded as delivered")
    ids = [r.headers["webhook-id"] for r in receiver.requests]
    assert len(ids) == len(set(ids)) == 20
    listed = await _deliveries(alice, made["endpoint_id"], limit=50)
    assert all(d["attempts"] == 1 for d in listed)


async def test_an_endpoint_stops_with_its_principal_s_last_token_N2_A1(
    gateway, api, alice_token, operator_token, demo, bot, receiver, messaging, identity
):
    """N2 A1: once alice's only API token is revoked, her endpoint's feed is no longer
    followed (the lease is not renewed) and a later reply is not posted."""
    alice = api(alice_token)
    inbox_id = await _inbox(api, alice_token)
    await _tool(alice, action="register", url=receiver.url, events=[f"inbox:{inbox_id}"])
    await _reply(bot, demo, inbox_id, "while allowed")
    await receiver.wait_for(1)

    ops = api(operator_token)
    tokens = (await ops.post("/api/v1/tools/tokens", json={"action": "list"})).json()["tokens"]
    (token_id,) = [t["token_id"] for t in tokens if t["principal"] == "user:alice"]
    revoked = await ops.post(
        "/api/v1/tools/tokens", json={"action": "revoke", "token_id": token_id}
    )
    assert revoked.status_code == 200, revoked.text
    webhooks_out = gateway.gateway.webhooks_out
    assert webhooks_out is not None
    await until(
        lambda: not webhooks_out.feeds.following, timeout=10, what="the feed no longer followed"
    )
    # alice writes through messaging itself (her token is gone), and the agent replies
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as direct:
        await direct.send("still there?", inbox_id=inbox_id)
    await _reply(bot, demo, inbox_id, "after the revocation")
    await asyncio.sleep(1.0)  # five polls and renewals of this gateway's settings
    assert [json.loads(r.body)["data"]["text"] for r in receiver.requests] == ["while allowed"]


async def test_each_call_end_arrives_signed_under_one_id_after_the_receiver_was_down_N2(
    gateway, api, alice_token, echo, runtime, demo, receiver
):
    """N2 (the issue's done-when, the downtime scaled to seconds by the settings): alice's
    endpoint for call_ends gets call.ended for each of her calls — completed with its
    answer, failed with its error — signed (standardwebhooks' verifier); the calls that
    end while the receiver is down arrive once it is up, each call under one id."""
    alice = api(alice_token)
    made = (await _tool(alice, action="register", url=receiver.url, events=["call_ends"]))[1]
    await receiver.stop()  # down while the calls end

    call_ids = []
    for i in range(4):
        response = await alice.post(
            "/api/v1/tools/functions",
            json={
                "action": "call",
                "crew": "demo",
                "function": "echo",
                "inputs": {"text": f"t{i}"},
            },
        )
        assert response.status_code == 200, response.text
        call_ids.append(response.json()["call_id"])
        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None
        if i == 3:
            await runtime.finish_execution(execution.call_id, failed=True, error="broken")
        else:
            await runtime.finish_execution(execution.call_id, final_message=f"done {i}")

    async def failing() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"])
        return len(listed) == 4 and all(d["status"] == "failing" for d in listed)

    await until(failing, timeout=15, what="four call ends stored and failing")
    await asyncio.sleep(DOWN_SECONDS)  # the receiver stays down this much longer
    await receiver.start()

    async def all_delivered() -> bool:
        listed = await _deliveries(alice, made["endpoint_id"])
        return all(d["status"] == "delivered" for d in listed)

    await until(all_delivered, timeout=15, what="every call end recorded as delivered")
    by_call: dict[str, set[str]] = {}
    ends: dict[str, dict[str, Any]] = {}
    for wid, event in _verified(made["secret"], receiver.requests):
        assert event["type"] == "call.ended"
        by_call.setdefault(event["data"]["call_id"], set()).add(wid)
        ends[event["data"]["call_id"]] = event["data"]
    assert sorted(by_call) == sorted(call_ids)
    assert all(len(ids) == 1 for ids in by_call.values())  # each call end under one id
    assert [ends[c]["state"] for c in call_ids] == ["completed"] * 3 + ["failed"]
    assert [ends[c]["answer"] for c in call_ids[:3]] == ["done 0", "done 1", "done 2"]
    assert ends[call_ids[3]]["error"] == "broken"
    assert all(ends[c]["target"] == "crew:demo" and ends[c]["function"] == "echo" for c in call_ids)
    assert all(ends[c]["caller"] == "user:alice" and ends[c]["ended_at"] for c in call_ids)
