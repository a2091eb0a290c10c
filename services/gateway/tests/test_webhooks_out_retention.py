"""Webhooks out keeps finished deliveries for a stated time, then deletes them (N2, X2):
with `GATEWAY_WEBHOOKS_KEEP_SECONDS=2`, a delivered delivery is listed (and could be
redelivered) at first and gone a few seconds later, while a failing one of another
endpoint, whose receiver is down, is kept however old it gets; an ended call's A2A
push config likewise, while a running call's stays."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import ListTaskPushNotificationConfigsRequest, TaskPushNotificationConfig

from agentworks.server.testing.waiting import until
from tests.fixtures.a2a_messages import call_message, send_once
from tests.fixtures.webhook_receiver import Receiver

KEEP_SECONDS = 2
SETTINGS = {
    "GATEWAY_WEBHOOKS_ALLOW": "127.0.0.1/32",
    "GATEWAY_WEBHOOKS_FIRST_RETRY_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_MAX_RETRY_INTERVAL_SECONDS": "0.5",
    "GATEWAY_WEBHOOKS_POLL_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_KEEP_SECONDS": str(KEEP_SECONDS),
}


@pytest.fixture
async def receivers():
    up, down = await Receiver().start(), await Receiver().start()
    await down.stop()
    yield up, down
    await up.stop()


async def _tool(client: Any, **args: Any) -> dict[str, Any]:
    response = await client.post("/api/v1/tools/endpoints", json=args)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def _statuses(client: Any, endpoint_id: str) -> list[str]:
    listed = await _tool(client, action="deliveries", endpoint_id=endpoint_id)
    return [d["status"] for d in listed["deliveries"]]


async def test_finished_deliveries_are_deleted_after_the_keep_time_and_failing_ones_kept_N2(
    start_gateway, api, alice_token, demo, bot, receivers
):
    """N2: the delivered delivery is listed, then deleted once KEEP_SECONDS have passed
    since it was delivered; the failing one (its receiver down) stays, retried."""
    up, down = receivers
    gateway = await start_gateway(**SETTINGS)
    alice = api(alice_token, base_url=gateway.url)
    sent = await alice.post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hi"}
    )
    assert sent.status_code == 200, sent.text
    inbox_id = sent.json()["inbox_id"]
    events = [f"inbox:{inbox_id}"]
    kept = await _tool(alice, action="register", url=up.url, events=events)
    failing = await _tool(alice, action="register", url=down.url, events=events)

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    await bot.send_message(inbox_id, "posted twice", complete_turn_id=turn.turn_id)
    await up.wait_for(1)
    await until(
        lambda: _statuses(alice, kept["endpoint_id"]),
        timeout=10,
        what="the delivery recorded",
    )
    delivered_at = time.monotonic()
    assert await _statuses(alice, kept["endpoint_id"]) == ["delivered"]

    async def gone() -> bool:
        return await _statuses(alice, kept["endpoint_id"]) == []

    await until(gone, timeout=KEEP_SECONDS * 5, every=0.2, what="the delivered one deleted")
    assert time.monotonic() - delivered_at >= KEEP_SECONDS - 0.5  # not before its time
    assert await _statuses(alice, failing["endpoint_id"]) == ["failing"]


async def test_an_ended_calls_a2a_push_config_is_deleted_after_the_keep_time_X2_N2(
    start_gateway, alice_token, demo, echo, runtime, receivers
):
    """X2 N2: once a call has ended and its last push is delivered, its config is listed
    for KEEP_SECONDS, then deleted with its endpoint and deliveries; the config of a call
    still running is kept."""
    up, _ = receivers
    gateway = await start_gateway(**SETTINGS)
    headers = {"Authorization": f"Bearer {alice_token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        tasks = []
        for n in range(2):
            message = call_message(f"k-{n}", "echo", {"text": "x"})
            sent = await send_once(client, message, immediately=True)
            tasks.append(sent.task.id)
            config = TaskPushNotificationConfig(task_id=sent.task.id, url=up.url, token="t")
            await client.create_task_push_notification_config(config)
        ended, running = tasks

        async def configs(task_id: str) -> int:
            request = ListTaskPushNotificationConfigsRequest(task_id=task_id)
            return len((await client.list_task_push_notification_configs(request)).configs)

        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None and execution.call_id == ended
        await runtime.finish_execution(ended, final_message="done")

        def completed() -> bool:
            return any(b'"TASK_STATE_COMPLETED"' in r.body for r in up.requests)

        await until(completed, timeout=15, what="the end pushed")
        assert await configs(ended) == 1  # kept for now
        pushed = time.monotonic()

        async def deleted() -> bool:
            return await configs(ended) == 0

        await until(deleted, timeout=KEEP_SECONDS * 5, every=0.2, what="the ended call's config")
        assert time.monotonic() - pushed >= KEEP_SECONDS - 0.5
        assert await configs(running) == 1
        await client.close()
