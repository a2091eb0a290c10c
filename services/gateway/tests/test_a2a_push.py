"""A2A push notifications through webhooks out (X2, X5, N2, A3), driven by a2a-sdk's own
client with a local receiver: a config on a call that asks a question gets the
input-required task, then after the answer the completed task with its artifact, signed
as Standard Webhooks says and carrying the config's token and authentication; only the
call's caller may set or read its configs; a refused URL stores nothing; a receiver
that was down still gets the end.

The runtime (`agent:demo/bot`) runs the executions with plain service calls, so each
state the receiver sees is one the test made happen.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import psycopg
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
)
from standardwebhooks import Webhook

from agentworks.server.testing.waiting import until
from agentworks_gateway.webhooks_out.sending import new_secret
from tests.fixtures.a2a_messages import call_message, send_once, text_message
from tests.fixtures.webhook_receiver import Received, Receiver

# Webhooks out's test knobs: retries every 0.2-0.5 s, leases of 2 s.
FAST = {
    "GATEWAY_WEBHOOKS_ALLOW": "127.0.0.1/32",
    "GATEWAY_WEBHOOKS_FIRST_RETRY_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_MAX_RETRY_INTERVAL_SECONDS": "0.5",
    "GATEWAY_WEBHOOKS_POLL_SECONDS": "0.2",
    "GATEWAY_WEBHOOKS_LEASE_SECONDS": "2",
}


@pytest.fixture
async def gateway(start_gateway):
    return await start_gateway(**FAST)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hook = await Receiver().start()
    yield hook
    await hook.stop()


@pytest.fixture
async def a2a(gateway) -> AsyncIterator[Callable]:
    """`await a2a(token)` -> (a2a-sdk client of crew:demo, its card), non-streaming."""
    made: list = []

    async def make(token: str):
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        made.append(http)
        card = await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        made.append(client)
        return client, card

    yield make
    for item in reversed(made):
        await (item.aclose() if isinstance(item, httpx.AsyncClient) else item.close())


def _pushed(requests: list[Received], path: str = "/hook") -> list[dict[str, Any]]:
    """The tasks posted to `path`, in the order they came."""
    return [json.loads(r.body)["task"] for r in requests if r.path == path]


def _states(tasks: list[dict[str, Any]]) -> list[str]:
    return [t["status"]["state"] for t in tasks]


async def _pushes_until(receiver: Receiver, state: str, path: str = "/hook") -> list[dict]:
    async def reached() -> list[dict] | None:
        tasks = _pushed(receiver.requests, path)
        return tasks if state in _states(tasks) else None

    found: list[dict] = await until(reached, timeout=15, what=f"a push of {state} to {path}")
    return found


async def test_a_config_pushes_the_question_then_the_completed_task_signed_X2_X5_N2(
    gateway, alice_token, demo, echo, runtime, a2a, receiver
):
    """X2 X5 N2: SendMessage with configuration.taskPushNotificationConfig (its URL
    passing the address policy, a token, a Standard Webhooks secret as its
    authentication) makes the call and the config; the receiver gets the task at each
    new state: input-required with the question, then after the answer completed with
    its artifacts; every push verifies with standardwebhooks under its own id and carries
    X-A2A-Notification-Token. A second config set with CreateTaskPushNotificationConfig
    (Bearer authentication) gets the same states with `Authorization: Bearer ...`.
    Get/List read the configs back without credentials; the card says pushNotifications."""
    client, card = await a2a(alice_token)
    assert card.capabilities.push_notifications
    secret = new_secret()
    config = TaskPushNotificationConfig(
        url=receiver.url,
        token="tok-1",
        authentication=AuthenticationInfo(scheme="StandardWebhooks", credentials=secret),
    )
    request = SendMessageRequest(
        message=call_message("p-1", "echo", {"text": "hi"}),
        configuration=SendMessageConfiguration(
            return_immediately=True, task_push_notification_config=config
        ),
    )
    (sent,) = [event async for event in client.send_message(request)]
    task_id = sent.task.id
    bearer = await client.create_task_push_notification_config(
        TaskPushNotificationConfig(
            task_id=task_id,
            id="second",
            url=receiver.url + "/b",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="let-me-in"),
        )
    )
    assert bearer.id == "second" and bearer.task_id == task_id
    assert bearer.authentication.scheme == "Bearer" and not bearer.authentication.credentials

    execution = await runtime.claim_execution([demo], wait_seconds=10)
    assert execution is not None and execution.call_id == task_id
    ask = asyncio.create_task(runtime.ask_input(task_id, "fmt", "Which format?", wait_seconds=20))
    asked = await _pushes_until(receiver, "TASK_STATE_INPUT_REQUIRED")
    assert asked[-1]["id"] == task_id
    assert asked[-1]["status"]["message"]["parts"][0]["text"] == "Which format?"

    await send_once(
        client, text_message("p-2", "csv", task_id=task_id, context_id=task_id), immediately=True
    )
    async with asyncio.timeout(20):
        assert (await ask).reply == "csv"
    await runtime.upload_file(task_id, "out.csv", b"a,b\n")
    await runtime.finish_execution(task_id, final_message="done as csv")
    tasks = await _pushes_until(receiver, "TASK_STATE_COMPLETED")
    await _pushes_until(receiver, "TASK_STATE_COMPLETED", "/hook/b")

    states = _states(tasks)
    assert states[-1] == "TASK_STATE_COMPLETED" and states.count("TASK_STATE_COMPLETED") == 1
    assert states.index("TASK_STATE_INPUT_REQUIRED") < states.index("TASK_STATE_COMPLETED")
    assert all(a != b for a, b in itertools.pairwise(states))  # only changes
    artifacts = {a["artifactId"]: a for a in tasks[-1]["artifacts"]}
    assert artifacts["answer"]["parts"][0]["text"] == "done as csv"
    assert "file:out.csv" in artifacts

    first = [r for r in receiver.requests if r.path == "/hook"]
    for pushed in first:
        Webhook(secret).verify(pushed.body, pushed.headers)  # raises when it does not
        assert pushed.headers["x-a2a-notification-token"] == "tok-1"
        assert "authorization" not in pushed.headers  # the secret never travels
    assert len({r.headers["webhook-id"] for r in first}) == len(first)
    second = [r for r in receiver.requests if r.path == "/hook/b"]
    assert all(r.headers["authorization"] == "Bearer let-me-in" for r in second)
    assert _states(_pushed(second, "/hook/b"))[-1] == "TASK_STATE_COMPLETED"

    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert [c.id for c in listed.configs] == [task_id, "second"]
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task_id, id=task_id)
    )
    assert got.url == receiver.url and got.token == "tok-1"
    assert got.authentication.scheme == "StandardWebhooks" and not got.authentication.credentials


async def test_only_the_caller_sets_or_reads_configs_and_a_refused_url_stores_nothing_X2_A3_N2(
    gateway, alice_token, make_token, demo, echo, bot, a2a, receiver
):
    """X2 A3 N2: another caller gets TaskNotFound for the task's configs (set, get,
    list, delete), the target's owner PERMISSION_DENIED; a URL the address policy
    refuses (a private address not in GATEWAY_WEBHOOKS_ALLOW) is InvalidParams naming
    the policy, and nothing is stored: no config, and on SendMessage no call either;
    a conversation's task has no push (PushNotificationNotSupported)."""
    client, _ = await a2a(alice_token)
    sent = await send_once(client, call_message("q-1", "echo", {"text": "x"}), immediately=True)
    task_id = sent.task.id
    mine = TaskPushNotificationConfig(task_id=task_id, id="c1", url=receiver.url)
    await client.create_task_push_notification_config(mine)

    bob, _ = await a2a(await make_token("user:bob"))
    with pytest.raises(TaskNotFoundError):
        await bob.create_task_push_notification_config(mine)
    with pytest.raises(TaskNotFoundError):
        await bob.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )
    with pytest.raises(TaskNotFoundError):
        await bob.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
    owner, _ = await a2a(await make_token("user:owner"))
    with pytest.raises(A2AClientError, match="only the caller"):
        await owner.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )

    private = TaskPushNotificationConfig(task_id=task_id, id="c2", url="http://10.1.2.3/hook")
    with pytest.raises(InvalidParamsError) as refused:
        await client.create_task_push_notification_config(private)
    assert refused.value.data is not None
    assert refused.value.data["rule"] == "address_policy"
    assert refused.value.data["setting"] == "GATEWAY_WEBHOOKS_ALLOW"
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert [c.id for c in listed.configs] == ["c1"]

    request = SendMessageRequest(
        message=call_message("q-2", "echo", {"text": "y"}),
        configuration=SendMessageConfiguration(
            return_immediately=True,
            task_push_notification_config=TaskPushNotificationConfig(url="http://10.1.2.3/"),
        ),
    )
    with pytest.raises(InvalidParamsError):
        [event async for event in client.send_message(request)]
    assert [t.id for t in (await client.list_tasks(ListTasksRequest())).tasks] == [task_id]

    talk = await send_once(client, text_message("q-3", "hello"))
    with pytest.raises(PushNotificationNotSupportedError):
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=talk.task.id, url=receiver.url)
        )

    with pytest.raises(TaskNotFoundError):
        await bob.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
    )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id)
    )
    assert list(listed.configs) == []
    with pytest.raises(TaskNotFoundError):
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )


async def test_push_off_the_card_says_so_and_configs_are_refused_X2_X1(
    start_gateway, alice_token, demo, echo
):
    """X2 X1: with GATEWAY_A2A_PUSH=false the card says pushNotifications false and a
    config is PushNotificationNotSupported (on its own and on SendMessage)."""
    off = await start_gateway(GATEWAY_A2A_PUSH="false")
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {alice_token}"}, timeout=60
    ) as http:
        card = await A2ACardResolver(http, f"{off.url}/a2a/crew/demo").get_agent_card()
        assert not card.capabilities.push_notifications
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        sent = await send_once(client, call_message("o-1", "echo", {"text": "x"}), immediately=True)
        with pytest.raises(PushNotificationNotSupportedError):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=sent.task.id, url="https://example.com/")
            )
        request = SendMessageRequest(
            message=call_message("o-2", "echo", {"text": "y"}),
            configuration=SendMessageConfiguration(
                task_push_notification_config=TaskPushNotificationConfig(url="https://example.com/")
            ),
        )
        with pytest.raises(PushNotificationNotSupportedError):
            [event async for event in client.send_message(request)]
        await client.close()


async def test_a_receiver_down_then_up_still_gets_the_end_X2_N2(
    gateway, database_url, alice_token, demo, echo, runtime, a2a, receiver
):
    """X2 N2: the receiver is down when the call ends: the push is attempted, fails and
    is retried with webhooks out's backoff; once the receiver is up it gets the
    completed task, once."""
    client, _ = await a2a(alice_token)
    sent = await send_once(client, call_message("d-1", "echo", {"text": "z"}), immediately=True)
    task_id = sent.task.id
    await receiver.stop()
    await client.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=task_id, url=receiver.url, token="t")
    )
    execution = await runtime.claim_execution([demo], wait_seconds=10)
    assert execution is not None
    await runtime.finish_execution(task_id, final_message="went")

    def failed_end() -> bool:
        with psycopg.connect(database_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM gateway.webhook_deliveries d"
                " JOIN gateway.a2a_push_configs p USING (endpoint_id)"
                " WHERE p.call_id = %s AND p.done_at IS NOT NULL AND d.status = 'failing'",
                (task_id,),
            ).fetchone()
        return bool(row and row[0])

    await until(failed_end, timeout=15, what="the end's push to fail while the receiver is down")
    await receiver.start()
    tasks = await _pushes_until(receiver, "TASK_STATE_COMPLETED")
    assert tasks[-1]["id"] == task_id
    assert _states(tasks).count("TASK_STATE_COMPLETED") == 1


async def test_a_replica_that_stops_hands_the_config_over_and_the_end_comes_once_X2_N2(
    start_gateway, gateway, alice_token, demo, echo, runtime, receiver
):
    """X2 N2: the config is set on one replica, which then stops; the call ends while
    only the other runs: it takes the config over and the receiver gets the end, once."""
    await start_gateway(**FAST)  # the other replica
    async with httpx.AsyncClient(
        headers={"Authorization": f"Bearer {alice_token}"}, timeout=60
    ) as http:
        card = await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        sent = await send_once(client, call_message("r-1", "echo", {"text": "x"}), immediately=True)
        task_id = sent.task.id
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, url=receiver.url)
        )
        await _pushes_until(receiver, "TASK_STATE_SUBMITTED")
        await client.close()
    await gateway.stop()
    execution = await runtime.claim_execution([demo], wait_seconds=10)
    assert execution is not None
    await runtime.finish_execution(task_id, final_message="went")
    tasks = await _pushes_until(receiver, "TASK_STATE_COMPLETED")
    assert _states(tasks).count("TASK_STATE_COMPLETED") == 1
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == len(receiver.requests)
