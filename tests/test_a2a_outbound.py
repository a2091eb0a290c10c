"""A2A outbound (X4, X5, C8, T3): a turn, with its capability, converses with and calls an
external agent on the operator's allow-list through the gateway; the agent is an a2a-sdk
server run here. Its reply comes back as a conversation_reply turn, a skill call's end
as function_completed; the operator's credential reaches the agent and nothing else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from a2a.helpers.proto_helpers import get_data_parts, get_message_text, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware

from agentworks.client.messaging import attributes_json
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.server.testing import free_port, until

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cret-operator-credential-x4"
CREW = "crew:demo"


class Peer(AgentExecutor):
    """Answers a text with 'heard: <text>'; a `double` skill call with twice its n."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
        )
        data = get_data_parts(context.message.parts)
        if data:
            await updater.add_artifact([new_text_part(json.dumps({"n": data[0]["n"] * 2}))])
            await updater.complete()
            return
        text = get_message_text(context.message)
        await updater.complete(updater.new_agent_message([new_text_part(f"heard: {text}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@pytest.fixture
async def external() -> AsyncIterator[dict[str, Any]]:
    """The external agent on 127.0.0.1: its card URL and the Authorization headers seen."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="peer",
        description="an external agent",
        version="1.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + "/a2a")
        ],
        skills=[AgentSkill(id="double", name="double", description="doubles n", tags=["x"])],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=Peer(), task_store=InMemoryTaskStore(), agent_card=card
    )
    seen: list[str] = []

    async def record(request: Any, call_next: Any) -> Any:
        seen.append(request.headers.get("authorization", ""))
        return await call_next(request)

    app = Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a"))
    app.add_middleware(BaseHTTPMiddleware, dispatch=record)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started, timeout=10)
    yield {"card_url": url + "/.well-known/agent-card.json", "seen": seen}
    server.should_exit = True
    await task


@pytest.fixture
async def outbound(start_gateway, external, tmp_path, demo):
    """A gateway whose allow-list has `peer` (bearer SECRET) for crew:demo and `other`
    for crew:else only; loopback allowed by the operator's address policy."""
    agents = {
        "agents": {
            "peer": {"card_url": external["card_url"], "bearer_token": SECRET},
            "other": {"card_url": external["card_url"], "targets": ["crew:else"]},
        }
    }
    path = tmp_path / "a2a-agents.json"
    path.write_text(json.dumps(agents))
    path.chmod(0o600)
    return await start_gateway(
        GATEWAY_A2A_AGENTS_FILE=str(path),
        GATEWAY_WEBHOOKS_ALLOW="127.0.0.1/32",
        GATEWAY_A2A_POLL_SECONDS="0.1",
    )


async def claimed(api, token: str, bot) -> m.Turn:
    sent = await api(token).post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "go"}
    )
    assert sent.status_code == 200, sent.text
    turn = await bot.claim_turn([CREW], wait_seconds=10)
    assert turn is not None and turn.capability
    return turn


async def next_turn(bot, kind: int) -> m.Turn:
    turn = await bot.claim_turn([CREW], wait_seconds=20)
    assert turn is not None
    assert [d.kind for d in turn.deliveries] == [kind], turn
    return turn


async def test_a_turn_converses_with_and_calls_an_external_agent_X4_X5(
    outbound, external, api, alice_token, bot
):
    """X4 X5 T3: a2a send with the turn's capability; the agent's reply comes back as a
    conversation_reply turn of that conversation with its text; a skill call's end as
    function_completed with the result; the agent got the operator's credential, the
    runtime's answers never hold it."""
    turn = await claimed(api, alice_token, bot)
    as_turn = api(turn.capability, base_url=outbound.url)
    sent = await as_turn.post("/api/v1/a2a/send", json={"agent": "peer", "text": "hello"})
    assert sent.status_code == 200, sent.text
    assert sent.json()["task_id"] and SECRET not in sent.text
    called = await as_turn.post(
        "/api/v1/a2a/call", json={"agent": "peer", "skill": "double", "inputs": {"n": 21}}
    )
    assert called.status_code == 200, called.text
    assert SECRET not in called.text
    await bot.complete_turn(turn.turn_id)

    got: dict[int, m.Delivery] = {}
    while len(got) < 2:
        later = await bot.claim_turn([CREW], wait_seconds=20)
        assert later is not None and later.conversation_id == turn.conversation_id
        for d in later.deliveries:
            got[d.kind] = d
        await bot.complete_turn(later.turn_id)
    reply = got[m.DELIVERY_KIND_CONVERSATION_REPLY]
    assert reply.text == "heard: hello"
    assert attributes_json(reply)["a2a_agent"] == "peer"
    end = got[m.DELIVERY_KIND_FUNCTION_COMPLETED]
    attributes = attributes_json(end)
    assert attributes["status"] == "completed" and attributes["skill"] == "double"
    (artifact,) = json.loads(attributes["result"])["artifacts"]
    assert json.loads(artifact["parts"][0]["text"]) == {"n": 42}
    assert f"Bearer {SECRET}" in external["seen"]
    for delivery in (reply, end):
        assert SECRET not in delivery.text and SECRET not in json.dumps(attributes_json(delivery))


async def test_refusals_off_the_list_out_of_scope_C8_and_without_a_turn_X4_C8_T3(
    outbound, external, api, alice_token, operator_token, bot
):
    """X4 C8 T3: an agent not on the allow-list (a URL given as a name) is NOT_FOUND; one
    the operator allows to another crew only is PERMISSION_DENIED; an API token or a
    missing token is refused; with crew:demo's switch off a conversation is refused
    (FAILED_PRECONDITION naming free_text_ask); after the turn ends its capability is
    refused. Nothing reached the external agent's RPC."""
    turn = await claimed(api, alice_token, bot)
    as_turn = api(turn.capability, base_url=outbound.url)
    url = await as_turn.post("/api/v1/a2a/send", json={"agent": external["card_url"], "text": "hi"})
    assert url.status_code == 404, url.text
    assert url.json()["error"]["reason"] == "NOT_FOUND"
    other = await as_turn.post("/api/v1/a2a/send", json={"agent": "other", "text": "hi"})
    assert other.status_code == 403 and other.json()["error"]["reason"] == "OUT_OF_SCOPE"
    token = await api(alice_token, base_url=outbound.url).post(
        "/api/v1/a2a/send", json={"agent": "peer", "text": "hi"}
    )
    assert token.status_code in (401, 403), token.text
    anonymous = await api(None, base_url=outbound.url).post(
        "/api/v1/a2a/send", json={"agent": "peer", "text": "hi"}
    )
    assert anonymous.status_code == 401

    switched = await api(operator_token, base_url=outbound.url).post(
        "/api/v1/tools/targets",
        json={"action": "update", "target": CREW, "free_text_ask": False},
    )
    assert switched.status_code == 200, switched.text
    off = await as_turn.post("/api/v1/a2a/send", json={"agent": "peer", "text": "hi"})
    assert off.status_code == 409 and off.json()["error"]["reason"] == "MESSAGING_DISABLED"
    assert "free_text_ask" in off.json()["error"]["message"]

    await bot.complete_turn(turn.turn_id)
    ended = await as_turn.post("/api/v1/a2a/call", json={"agent": "peer", "skill": "double"})
    assert ended.status_code in (401, 403, 409), ended.text
    assert external["seen"] == []


async def test_the_agent_tools_reach_the_agent_and_never_hold_the_credential_X4_L1_T3(
    outbound, external, api, alice_token, messaging, identity
):
    """X4 L1 T3 (an attacker's view): a turn's a2a_send and a2a_call tools, acting with
    the turn's capability only, reach the external agent; no tool result, no turn
    context field and no log line of the runtime holds the operator's credential."""
    from structlog.testing import capture_logs

    from agentworks.agents.agent_mcp.acting import capability_view
    from agentworks.agents.agent_tools import turn_toolbox
    from agentworks.runtime import TurnWorker

    results: list[dict[str, Any]] = []
    contexts: list[str] = []
    done = asyncio.Event()

    async def handle(ctx: Any) -> None:
        if done.is_set():
            return
        box = turn_toolbox(capability_view(ctx, "turn"))
        results.append(await box.call("a2a_send", {"agent": "peer", "text": "tools"}))
        results.append(
            await box.call("a2a_call", {"agent": "peer", "skill": "double", "inputs": {"n": 1}})
        )
        contexts.append(repr(ctx) + repr(vars(ctx)))
        done.set()

    worker = TurnWorker(
        messaging.address,
        identity("agent:demo/bot"),
        [CREW],
        handle,
        wait_seconds=2,
        lease_seconds=10,
        gateway_url=outbound.url,
    )
    with capture_logs() as logs:
        running = asyncio.create_task(worker.run())
        sent = await api(alice_token).post(
            "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "go"}
        )
        assert sent.status_code == 200, sent.text
        await asyncio.wait_for(done.wait(), 30)
        worker.stop()
        await asyncio.wait_for(running, 30)
    assert [r["agent"] for r in results] == ["peer", "peer"] and all(r["task_id"] for r in results)
    assert f"Bearer {SECRET}" in external["seen"]
    for text in (json.dumps(results), *contexts, repr(logs)):
        assert SECRET not in text
