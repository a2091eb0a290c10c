"""The A2A binding under the gateway's and the target's limits (X2, X5, B6, F5), with
a2a-sdk's own client: an open A2A stream waits in the wait pool, not the request pool;
a call refused busy is an A2A error and leaves no task queued.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)

from agentworks.server.testing import until
from tests.fixtures.a2a_messages import call_message, send_once, text_message


async def _client(url: str, token: str, *, streaming: bool):
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    card = await A2ACardResolver(http, f"{url}/a2a/crew/demo").get_agent_card()
    return http, ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)


async def test_an_open_a2a_stream_holds_a_wait_not_a_request_X2_X5_B6(
    start_gateway, alice_token, demo, bot
):
    """X2 X5 B6: with one request place and one wait place, an open SendStreamingMessage
    (a conversation, which never ends by itself) holds the wait: GetTask is still
    served meanwhile, and a second stream is refused 503 at once; closing the stream
    gives its place back."""
    gateway = await start_gateway(GATEWAY_MAX_WAITS="1", GATEWAY_MAX_REQUESTS="1")
    http, streaming = await _client(gateway.url, alice_token, streaming=True)
    plain_http, plain = await _client(gateway.url, alice_token, streaming=False)
    try:
        stream = streaming.send_message(SendMessageRequest(message=text_message("w-1", "hi")))
        async with asyncio.timeout(20):
            task = (await anext(stream)).task
            assert gateway.gateway.admission.waits == 1
            assert gateway.gateway.admission.requests == 0
            got = await plain.get_task(GetTaskRequest(id=task.id))
            assert got.id == task.id and got.status.state == TaskState.TASK_STATE_WORKING
            second = await http.post(
                f"{gateway.url}/a2a/crew/demo",
                json={
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "SubscribeToTask",
                    "params": {"id": task.id},
                },
            )
            assert second.status_code == 503, second.text
            assert second.json()["error"]["metadata"]["pool"] == "waits"
            await stream.aclose()
        await until(
            lambda: gateway.gateway.admission.waits == 0, timeout=10, what="the stream's place back"
        )
    finally:
        await plain.close()
        await streaming.close()
        await http.aclose()
        await plain_http.aclose()


async def test_a_busy_target_refuses_an_a2a_call_without_queueing_it_X2_X5_F5(
    gateway, api, operator_token, alice_token, demo, echo, runtime
):
    """X2 X5 F5: crew:demo with a running limit of 1 and one call held by a runtime:
    another SendMessage naming echo is an A2A error at once (JSON-RPC -32000, reason
    RUNNING_LIMIT in the ErrorInfo), streamed or not, and no task is made for it (ListTasks
    shows the one running call); once that call ends, the same message is a call."""
    limited = await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "set_limit", "target": "crew:demo", "running_limit": 1},
    )
    assert limited.status_code == 200, limited.text
    http, client = await _client(gateway.url, alice_token, streaming=False)
    streaming_http, streaming = await _client(gateway.url, alice_token, streaming=True)
    try:
        first = await send_once(
            client, call_message("b-1", "echo", {"text": "a"}), immediately=True
        )
        held = await runtime.claim_execution([demo], wait_seconds=10)
        assert held is not None and held.call_id == first.task.id

        for a2a in (client, streaming):
            with pytest.raises(A2AClientError) as busy:
                async with asyncio.timeout(10):  # at once: no queue, no blocking wait
                    await send_once(a2a, call_message("b-2", "echo", {"text": "b"}))
            assert "-32000" in str(busy.value) and "busy: crew:demo" in str(busy.value)
        raw = await http.post(
            f"{gateway.url}/a2a/crew/demo",
            json={
                "jsonrpc": "2.0",
                "id": 3,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "role": "ROLE_USER",
                        "messageId": "b-3",
                        "parts": [{"data": {"text": "c"}}],
                        "metadata": {"skill": "echo"},
                    },
                    "configuration": {"returnImmediately": True},
                },
            },
        )
        error = raw.json()["error"]
        assert error["code"] == -32000
        (info,) = error["data"]
        assert info["reason"] == "RUNNING_LIMIT" and info["domain"] == "agentworks"
        assert error["message"].startswith("busy: crew:demo is running 1 calls")
        assert info["metadata"]["code"] == "RESOURCE_EXHAUSTED"
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == [first.task.id]

        await runtime.finish_execution(first.task.id, final_message="done")
        again = await client.send_message(
            SendMessageRequest(
                message=call_message("b-2", "echo", {"text": "b"}),
                configuration=SendMessageConfiguration(return_immediately=True),
            )
        ).__anext__()
        assert again.task.id != first.task.id
    finally:
        await client.close()
        await streaming.close()
        await http.aclose()
        await streaming_http.aclose()
