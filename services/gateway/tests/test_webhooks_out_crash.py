"""Webhooks out when things go wrong (N2, P4): a kill -9 of the gateway that was following
the feed and sending (the deliveries it stored and the events that came while no gateway
ran all reach the receiver, each under one id), and a receiver down past the retry time
(the delivery gives up, and a redeliver still sends it). Each test runs only gateways of
its own settings."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import httpx
from standardwebhooks import Webhook

from agentworks.client import MessagingClient
from agentworks.server.testing.waiting import until
from tests.fixtures.webhook_receiver import Receiver

FAST = {
    "GATEWAY_WEBHOOKS_ALLOW": "127.0.0.1/32",
    "GATEWAY_WEBHOOKS_FIRST_RETRY_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_MAX_RETRY_INTERVAL_SECONDS": "0.5",
    "GATEWAY_WEBHOOKS_POLL_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_LEASE_SECONDS": "2",
}


async def _post(client: httpx.AsyncClient, tool: str, **args: Any) -> dict[str, Any]:
    response = await client.post(f"/api/v1/tools/{tool}", json=args)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def _replies(bot: Any, inbox_id: str, *texts: str) -> None:
    turn = await bot.claim_turn(["crew:demo"], wait_seconds=10)
    assert turn is not None
    for i, text in enumerate(texts):
        done = turn.turn_id if i == len(texts) - 1 else ""
        await bot.send_message(inbox_id, text, complete_turn_id=done)


async def test_a_kill_9_of_the_sending_gateway_loses_no_event_N2_P4(
    database_url, signing_keys, messaging, functions, start_gateway, make_token, bot, identity
):
    """N2 P4: a gateway process follows alice's inbox and stores deliveries while the
    receiver is down; it is killed (SIGKILL) and more replies come while no gateway
    runs; another gateway takes the feed over from its stored cursor after the lease
    and retries the stored deliveries: once the receiver is up it has every reply, each
    under one id."""
    operator = await make_token("user:ops", operator=True)
    alice_token = await make_token("user:alice")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "GATEWAY_"))},
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "GATEWAY_MESSAGING_ADDRESS": messaging.address,
        "GATEWAY_FUNCTIONS_ADDRESS": functions.address,
        **signing_keys.env("gateway"),
        **FAST,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentworks_gateway", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    receiver = Receiver()
    try:
        async with asyncio.timeout(30):
            assert process.stdout is not None
            line = (await process.stdout.readline()).decode()
        url = "http://" + line.split()[3]
        auth = {"Authorization": f"Bearer {alice_token}"}
        async with (
            httpx.AsyncClient(base_url=url, timeout=30, headers=auth) as alice,
            httpx.AsyncClient(
                base_url=url, timeout=30, headers={"Authorization": f"Bearer {operator}"}
            ) as ops,
        ):
            await _post(ops, "targets", action="register", target="crew:demo", owner="user:owner")
            inbox_id = (await _post(alice, "messages", action="send", crew="demo", message="hi"))[
                "inbox_id"
            ]
            made = await _post(
                alice,
                "endpoints",
                action="register",
                url=receiver.url,
                events=[f"inbox:{inbox_id}"],
            )
            await _replies(bot, inbox_id, "before 1", "before 2", "before 3")

            async def stored() -> bool:
                page = await _post(
                    alice, "endpoints", action="deliveries", endpoint_id=made["endpoint_id"]
                )
                return len(page["deliveries"]) == 3 and all(
                    d["status"] == "failing" for d in page["deliveries"]
                )

            await until(stored, timeout=15, what="three failing deliveries stored by the process")
        process.kill()  # kill -9: no drain, no release of its leases
        await process.wait()

        # alice writes again through messaging itself (no gateway is up); two replies come
        async with MessagingClient(messaging.address, identity=identity("user:alice")) as direct:
            await direct.send("and?", inbox_id=inbox_id)
        await _replies(bot, inbox_id, "during 1", "during 2")
        taker = await start_gateway(**FAST)
        await receiver.start()
        texts = ["before 1", "before 2", "before 3", "during 1", "during 2"]
        got = await receiver.wait_for(len(texts), timeout=30)
        await asyncio.sleep(0.5)  # a duplicate would arrive now
        events = {
            r.headers["webhook-id"]: Webhook(made["secret"]).verify(r.body, r.headers)
            for r in receiver.requests
        }
        assert sorted(e["data"]["text"] for e in events.values()) == sorted(texts), got
        assert len({e["data"]["message_id"] for e in events.values()}) == len(events) == 5
        assert taker.gateway.webhooks_out is not None
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await receiver.stop()


async def test_a_delivery_gives_up_after_its_retry_time_and_can_be_redelivered_N2(
    start_gateway, make_token, bot
):
    """N2: with GATEWAY_WEBHOOKS_RETRY_SECONDS=1 a reply whose receiver stays down is
    retried, then listed gave_up with its last error and no next attempt; a redeliver
    once the receiver is up sends it under the same id and it turns delivered."""
    gateway = await start_gateway(**FAST, GATEWAY_WEBHOOKS_RETRY_SECONDS="1")
    operator = await make_token("user:ops", operator=True)
    alice_token = await make_token("user:alice")
    receiver = Receiver()  # down: never started yet
    async with (
        httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {operator}"}
        ) as ops,
        httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {alice_token}"}
        ) as alice,
    ):
        await _post(ops, "targets", action="register", target="crew:demo", owner="user:owner")
        inbox_id = (await _post(alice, "messages", action="send", crew="demo", message="hi"))[
            "inbox_id"
        ]
        made = await _post(
            alice, "endpoints", action="register", url=receiver.url, events=[f"inbox:{inbox_id}"]
        )
        await _replies(bot, inbox_id, "too late")

        async def gave_up() -> list[dict[str, Any]]:
            page = await _post(
                alice,
                "endpoints",
                action="deliveries",
                endpoint_id=made["endpoint_id"],
                status="gave_up",
            )
            return list(page["deliveries"])

        (delivery,) = await until(gave_up, timeout=15, what="the delivery listed gave_up")
        assert delivery["attempts"] >= 2 and delivery["last_error"]
        assert delivery["next_attempt_at"] is None and delivery["delivered_at"] is None

        await receiver.start()
        try:
            again = await _post(
                alice, "endpoints", action="redeliver", delivery_id=delivery["delivery_id"]
            )
            assert again["status"] == "pending"
            (got,) = await receiver.wait_for(1)
            assert got.headers["webhook-id"] == delivery["delivery_id"]
            event = Webhook(made["secret"]).verify(got.body, got.headers)
            assert event["data"]["text"] == "too late"
        finally:
            await receiver.stop()
