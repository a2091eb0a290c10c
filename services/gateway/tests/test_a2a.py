"""The A2A binding driven by a2a-sdk's own client (X1, X2, X3, X5): discovery, a
function call with a question and its answer, a streamed call, a cancel, a conversation
with two replies, and A3 (another token cannot see a task).

The runtime (`agent:demo/bot`) runs the executions and turns with plain service calls,
so each step the A2A client observes is one the test made happen.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from agentworks.server.testing import served_requests, until
from tests.fixtures.a2a_messages import call_message, send_once, text_message

INPUT_SCHEMAS = "urn:agentworks:a2a:input-schemas:v1"


@pytest.fixture
async def a2a(gateway) -> AsyncIterator[Callable]:
    """`await a2a(token, streaming=...)` -> an a2a-sdk client of crew:demo's agent,
    made from the card it resolves at the agent's well-known path."""
    made: list = []

    async def make(token: str, *, streaming: bool = True, target: str = "crew/demo"):
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        made.append(http)
        card = await A2ACardResolver(http, f"{gateway.url}/a2a/{target}").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
        made.append(client)
        return client, card

    yield make
    for item in reversed(made):
        await (item.aclose() if isinstance(item, httpx.AsyncClient) else item.close())


async def test_agent_cards_list_the_functions_and_the_conversation_X1_X5(
    gateway, alice_token, make_token, demo, echo, a2a
):
    """X1 X5: the card a2a-sdk resolves: skills (echo with its input schema in the
    extension, the conversation), bearer security, the JSON-RPC interface; the listing;
    a caller who may call no function sees the conversation skill only and lists no
    agent; an unknown target has no card (404); no card without a token (401)."""
    _, card = await a2a(alice_token)
    assert card.name == "crew:demo"
    assert [s.id for s in card.skills] == ["echo", "agentworks:conversation"]
    (interface,) = card.supported_interfaces
    assert interface.url == f"{gateway.url}/a2a/crew/demo"
    assert interface.protocol_binding == "JSONRPC" and interface.protocol_version == "1.0"
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert list(card.security_requirements[0].schemes) == ["bearer"]
    assert card.capabilities.streaming
    (extension,) = card.capabilities.extensions
    assert extension.uri == INPUT_SCHEMAS
    schemas = MessageToDict(extension.params)["skills"]
    assert schemas["echo"]["required"] == ["text"]

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {alice_token}"}) as http:
        listed = (await http.get(f"{gateway.url}/a2a/agents")).json()
        assert [a["name"] for a in listed["agents"]] == ["crew:demo"]
        assert listed["next_cursor"] == ""
    async with httpx.AsyncClient() as anonymous:
        card_url = f"{gateway.url}/a2a/crew/demo/.well-known/agent-card.json"
        assert (await anonymous.get(card_url)).status_code == 401
    stranger = await make_token("agent:other/bot")
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {stranger}"}) as http:
        seen = await http.get(f"{gateway.url}/a2a/crew/demo/.well-known/agent-card.json")
        assert [s["id"] for s in seen.json()["skills"]] == ["agentworks:conversation"]
        assert (await http.get(f"{gateway.url}/a2a/agents")).json()["agents"] == []
        unknown = await http.get(f"{gateway.url}/a2a/crew/nope/.well-known/agent-card.json")
        assert unknown.status_code == 404, unknown.text


async def test_a_function_call_asks_and_is_answered_X2_X5_A3(
    gateway, alice_token, make_token, demo, echo, runtime, a2a
):
    """X2 X5 A3 F3 F6 F11: SendMessage naming a skill is a call (task id = call_id);
    the retry key is the message id; the question is the input-required status message;
    a message with the taskId answers it; the answer and a file are artifacts; ListTasks
    has it; another token gets TaskNotFound; bad inputs are refused before any call."""
    client, _ = await a2a(alice_token, streaming=False)
    sent = await send_once(
        client, call_message("m-1", "echo", {"text": "hi", "count": 2}), immediately=True
    )
    task = sent.task
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert task.context_id == task.id
    again = await send_once(
        client, call_message("m-1", "echo", {"text": "hi", "count": 2}), immediately=True
    )
    assert again.task.id == task.id  # the message id is the retry key (F6)

    with pytest.raises(InvalidParamsError) as refused:
        await send_once(client, call_message("m-2", "echo", {"count": "x"}))
    assert refused.value.data is not None
    assert refused.value.data["code"] == "INVALID_ARGUMENT"

    execution = await runtime.claim_execution([demo], wait_seconds=10)
    assert execution is not None and execution.call_id == task.id
    ask = asyncio.create_task(runtime.ask_input(task.id, "fmt", "Which format?", wait_seconds=20))

    async def asked():
        got = await client.get_task(GetTaskRequest(id=task.id))
        return got if got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED else None

    waiting = await until(asked, timeout=10, what="the task to require input")
    assert waiting.status.message.parts[0].text == "Which format?"

    answered = await send_once(
        client, text_message("m-3", "csv", task_id=task.id, context_id=task.id), immediately=True
    )
    assert answered.task.status.state == TaskState.TASK_STATE_WORKING
    async with asyncio.timeout(20):
        assert (await ask).reply == "csv"
    await runtime.upload_file(task.id, "out.csv", b"a,b\n1,2\n")
    await runtime.finish_execution(task.id, final_message="done as csv")

    done = await client.get_task(GetTaskRequest(id=task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = {a.artifact_id: a for a in done.artifacts}
    assert artifacts["answer"].parts[0].text == "done as csv"
    assert artifacts["file:out.csv"].parts[0].raw == b"a,b\n1,2\n"
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [task.id]
    assert listed.tasks[0].status.state == TaskState.TASK_STATE_COMPLETED

    other, _ = await a2a(await make_token("user:bob"), streaming=False)
    with pytest.raises(TaskNotFoundError):
        await other.get_task(GetTaskRequest(id=task.id))
    assert list((await other.list_tasks(ListTasksRequest())).tasks) == []


def statuses(events: list[StreamResponse]) -> list[Any]:
    """The task statuses a stream told, in order: its first task's, then each update's."""
    told = [e.task.status for e in events if e.HasField("task")]
    return told + [e.status_update.status for e in events if e.HasField("status_update")]


async def test_a_streamed_call_and_a_cancel_X2_X5_F15(
    gateway, alice_token, demo, echo, runtime, a2a
):
    """X2 X5 F15: SendStreamingMessage streams the task, its progress, its artifacts and
    its end; CancelTask ends another call canceled."""
    client, _ = await a2a(alice_token, streaming=True)
    request = SendMessageRequest(message=call_message("s-1", "echo", {"text": "go"}))
    events: list[StreamResponse] = []

    async def drive() -> None:
        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None
        await runtime.report(execution.call_id, progress="halfway", sequence=1)
        await until(
            lambda: any(status.message.parts for status in statuses(events)),
            timeout=10,
            what="the progress on the stream",
        )
        await runtime.finish_execution(execution.call_id, final_message="went")

    driving = asyncio.create_task(drive())
    async with asyncio.timeout(30):
        async for event in client.send_message(request):
            events.append(event)
    await driving
    assert events[0].task.status.state in (
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
    )
    # The progress is the first status with words: in an update, or already in the
    # first event's task when the stream began after the report (a stream begun while
    # the call was submitted says "working", with no message, when it is claimed).
    said = [status for status in statuses(events) if status.message.parts]
    assert said[0].message.parts[0].text == "halfway"
    assert statuses(events)[-1].state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifact.parts[0].text == "went"

    plain, _ = await a2a(alice_token, streaming=False)
    open_call = await send_once(plain, call_message("c-1", "echo", {"text": "x"}), immediately=True)
    canceled = await plain.cancel_task(CancelTaskRequest(id=open_call.task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_conversation_with_two_replies_X3_X5_C2_C6(
    gateway, api, operator_token, alice_token, make_token, demo, bot, a2a
):
    """X3 X5 C2 C3 C6: a message without a skill is a send; the task (id and context =
    the inbox) stays working and says nothing itself; the agent's two replies come on
    the stream as agent messages and are the task's history on a later GetTask; a
    follow-up in the context continues the conversation; no other caller sees it."""
    client, _ = await a2a(alice_token, streaming=True)
    request = SendMessageRequest(message=text_message("c-1", "hello"))
    events: list[StreamResponse] = []
    stream = client.send_message(request)
    async with asyncio.timeout(30):
        events.append(await anext(stream))
        task = events[0].task
        assert task.status.state == TaskState.TASK_STATE_WORKING
        assert not task.status.HasField("message") and task.id == task.context_id
        receipt = MessageToDict(task.metadata)["agentworks"]["receipt"]
        assert receipt["inbox_id"] == task.id and receipt["accepted"] is True

        turn = await bot.claim_turn([demo], wait_seconds=10)
        assert turn is not None and turn.reply_inbox_id == task.id
        await bot.send_message(turn.reply_inbox_id, "one moment")
        await bot.send_message(turn.reply_inbox_id, "here it is", complete_turn_id=turn.turn_id)
        events.append(await anext(stream))
        events.append(await anext(stream))
        await stream.aclose()
    replies = [e.status_update.status.message for e in events[1:]]
    assert [r.parts[0].text for r in replies] == ["one moment", "here it is"]
    assert all(r.role == Role.ROLE_AGENT and r.context_id == task.id for r in replies)
    assert all(e.status_update.status.state == TaskState.TASK_STATE_WORKING for e in events[1:])

    plain, _ = await a2a(alice_token, streaming=False)
    later = await plain.get_task(GetTaskRequest(id=task.id))
    assert [m.parts[0].text for m in later.history] == ["one moment", "here it is"]
    assert later.status.state == TaskState.TASK_STATE_WORKING
    follow = await send_once(plain, text_message("c-2", "thanks", context_id=task.id))
    assert follow.task.id == task.id
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None and turn.deliveries[0].message.text == "thanks"
    await bot.complete_turn(turn.turn_id)

    # A streamed follow-up carries the replies after it only (from its receipt's
    # cursor), not the conversation's earlier ones.
    fresh = await _streamed_follow_up(client, bot, demo, task.id, "c-3", "fresh")
    assert [p.text for p in fresh.parts] == ["fresh"]

    # The context is the caller's, but of crew:demo: at another agent's URL it is not
    # found, although the gateway now knows it (X3, C3).
    await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:other", "owner": "user:owner"},
    )
    elsewhere, _ = await a2a(alice_token, streaming=False, target="crew/other")
    with pytest.raises(TaskNotFoundError):
        await elsewhere.get_task(GetTaskRequest(id=task.id))
    with pytest.raises(TaskNotFoundError):
        await send_once(elsewhere, text_message("c-4", "wrong door", context_id=task.id))

    other, _ = await a2a(await make_token("user:bob"), streaming=False)
    with pytest.raises(TaskNotFoundError):
        await other.get_task(GetTaskRequest(id=task.id))


async def test_a_long_conversation_costs_its_a2a_requests_no_more_X3_B1(
    gateway, alice_token, demo, bot, a2a
):
    """X3 B1: with 150 replies in the conversation (more than a page of the inbox),
    GetTask reads the inbox once, from its end (its history: the newest 20); a streamed
    follow-up reads nothing before it streams from its message on; SubscribeToTask
    reads the inbox once (the task's history and the end it streams from) and then
    carries only the replies after it."""
    client, _ = await a2a(alice_token, streaming=False)
    task = (await send_once(client, text_message("l-1", "count"))).task
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    for i in range(150):
        await bot.send_message(turn.reply_inbox_id, f"r{i}")
    await bot.complete_turn(turn.turn_id)

    reads = served_requests("messaging", "Read")
    later = await client.get_task(GetTaskRequest(id=task.id))
    assert served_requests("messaging", "Read") - reads == 1
    assert [m.parts[0].text for m in later.history] == [f"r{i}" for i in range(130, 150)]

    streaming, _ = await a2a(alice_token, streaming=True)
    reads = served_requests("messaging", "Read")
    reply = await _streamed_follow_up(streaming, bot, demo, task.id, "l-2", "r150")
    assert reply.parts[0].text == "r150"
    assert served_requests("messaging", "Read") - reads == 0

    reads = served_requests("messaging", "Read")
    subscription = streaming.subscribe(SubscribeToTaskRequest(id=task.id))
    async with asyncio.timeout(30):
        first = (await anext(subscription)).task
        assert served_requests("messaging", "Read") - reads == 1
        assert [m.parts[0].text for m in first.history][-2:] == ["r149", "r150"]
        await bot.send_message(turn.reply_inbox_id, "r151")
        update = (await anext(subscription)).status_update.status.message
        await subscription.aclose()
    assert [p.text for p in update.parts] == ["r151"]


async def _streamed_follow_up(
    client: Any, bot: Any, demo: str, task_id: str, message_id: str, answer: str
) -> Any:
    """A streamed follow-up in the context `task_id`: its first event is the task; the
    agent's turn then answers `answer`; returns the next event's agent message."""
    stream = client.send_message(
        SendMessageRequest(message=text_message(message_id, "more", context_id=task_id))
    )
    async with asyncio.timeout(30):
        assert (await anext(stream)).task.id == task_id
        turn = await bot.claim_turn([demo], wait_seconds=10)
        assert turn is not None
        await bot.send_message(turn.reply_inbox_id, answer, complete_turn_id=turn.turn_id)
        message = (await anext(stream)).status_update.status.message
        await stream.aclose()
    return message
