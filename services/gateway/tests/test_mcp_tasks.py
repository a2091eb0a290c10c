"""Calls as MCP tasks, questions as elicitations, files as resources, with the official
MCP Python SDK client over the gateway's Streamable HTTP endpoint (M1, M2, M3, M5).

A runtime (`agent:demo/bot`) runs each execution with plain FunctionsClient calls, so
each step the MCP client sees is one the test made happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentworks.client import FunctionsClient
from tests.fixtures.mcp_tasks_client import (
    EXTENSION,
    CancelTask,
    GetTask,
    TaskIdParams,
    TasksClient,
    resource_text,
    send,
)

REPORT_SCHEMA = {
    "type": "object",
    "properties": {"format": {"type": "string"}, "rows": {"type": "integer"}},
    "required": ["format", "rows"],
    "additionalProperties": False,
}


@pytest.fixture
async def report(functions, identity, demo) -> str:
    """crew:demo's function `report`, with an output schema, callable by every user."""
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo,
            "report",
            description="Write a report.",
            input_schema={"type": "object"},
            output_schema=REPORT_SCHEMA,
            allowed_callers=["user:*"],
        )
    return "report"


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str, **options: Any) -> AsyncIterator[Client]:
    """The SDK's client, 5 s per request, with the bearer token on every request."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(5)
    )
    async with (
        http,
        Client(
            streamable_http_client(url, http_client=http), read_timeout_seconds=5, **options
        ) as client,
    ):
        yield client


async def run_report(
    runtime: FunctionsClient, demo: str, question: str, choices: tuple[str, ...] = ()
) -> str:
    """Run one `report` execution: ask `question` (offering `choices`), write the
    answer's file and result."""
    execution = await runtime.claim_execution([demo], wait_seconds=20)
    assert execution is not None
    call_id = execution.call_id
    await runtime.report(call_id, progress="halfway", sequence=1)
    asked = await runtime.ask_input(call_id, "q1", question, wait_seconds=25, choices=choices)
    await runtime.upload_file(call_id, "report.txt", f"format={asked.reply}\n".encode())
    result = {"format": asked.reply, "rows": 3}
    await runtime.upload_file(call_id, "result.json", json.dumps(result).encode())
    await runtime.finish_execution(call_id, final_message=f"wrote {asked.reply}")
    return asked.reply


async def test_a_call_is_a_task_its_question_answered_with_tasks_update_M1_M2_M3_M5(
    gateway, alice_token, demo, report, runtime
):
    """M1 M2 M3 M5: `functions` call from a client that declared the Tasks extension is a
    task (taskId = call_id); tasks/get shows working, then input_required with the
    question as an elicitation form; tasks/update posts the answer as the reply; the
    completed task's result is the validated result, its file a resource_link the client
    reads with resources/read."""
    asked: list[tuple[str, dict]] = []

    async def answer(key: str, request: dict) -> dict:
        asked.append((key, request))
        return {"action": "accept", "content": {"answer": "csv"}}

    tasks = TasksClient(answer)
    runner = asyncio.create_task(run_report(runtime, demo, "Which format?"))
    async with mcp_client(gateway.mcp_url, alice_token, extensions=[tasks]) as mcp:
        capabilities = mcp.session.server_capabilities
        assert capabilities is not None and EXTENSION in (capabilities.extensions or {})
        result = await mcp.call_tool("functions", {"action": "call", "crew": "demo",
                                                   "function": "report", "inputs": {}})  # fmt: skip
        assert await asyncio.wait_for(runner, 20) == "csv"
        assert not result.is_error
        (created,) = tasks.created
        call_id = created.task_id
        # The task as it stands when made: working, or already asking when the waiting
        # runtime claimed the call and asked before the gateway read it (under load).
        assert created.status in ("working", "input_required") and call_id
        statuses = [t["status"] for t in tasks.seen]
        assert statuses[-1] == "completed" and "input_required" in statuses
        ((key, request),) = asked
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Which format?"
        assert request["params"]["requestedSchema"]["required"] == ["answer"]
        waiting = next(t for t in tasks.seen if t["status"] == "input_required")
        assert list(waiting["inputRequests"]) == [key]
        assert waiting["statusMessage"] == "Which format?"

        status = result.structured_content
        assert status["call_id"] == call_id and status["status"] == "completed"
        assert status["result"] == {"format": "csv", "rows": 3}
        links = {b.name: b for b in result.content if b.type == "resource_link"}
        assert set(links) == {"report.txt", "result.json"}
        assert str(links["report.txt"].uri) == f"agentworks://calls/{call_id}/files/report.txt"
        read = await mcp.read_resource(str(links["report.txt"].uri))
        assert resource_text(read) == ("format=csv\n", {"offset": 0, "size": 11})
        paged = await mcp.read_resource(f"{links['report.txt'].uri}?offset=7&limit=2")
        assert resource_text(paged) == ("cs", {"offset": 7, "size": 11, "next_offset": 9})

        templates = await mcp.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == [
            "agentworks://calls/{call_id}/files/{name}{?offset,limit}",
            "agentworks://conversations/{conversation_id}/transcript{?cursor,limit}",
        ]


async def test_a_question_reaches_the_sdk_elicitation_callback_decline_leaves_it_open_M2_M5(
    gateway, alice_token, demo, report, runtime
):
    """M2 M5: a status read of a call waiting for an answer, from a 2026-07-28 client with
    an elicitation callback, asks the question (InputRequiredResult): a decline returns
    the status with the question still open; an accept posts the answer as the reply."""
    actions: list[Literal["decline", "accept"]] = ["decline", "accept"]
    asked: list[str] = []

    async def elicit(context, params):  # the SDK's elicitation callback
        asked.append(params.message)
        action = actions.pop(0)
        if action == "accept":
            return types.ElicitResult(action=action, content={"answer": "tsv"})
        return types.ElicitResult(action=action)

    runner = asyncio.create_task(run_report(runtime, demo, "Which separator?"))
    async with mcp_client(gateway.mcp_url, alice_token, elicitation_callback=elicit) as mcp:
        assert mcp.protocol_version == "2026-07-28"
        made = await mcp.call_tool(
            "functions", {"action": "call", "crew": "demo", "function": "report", "inputs": {}}
        )
        call_id = made.structured_content["call_id"]  # no extension: today's receipt
        assert made.structured_content["status"] == "running"
        read = {"action": "status", "call_id": call_id, "wait_seconds": 3}
        status = (await mcp.call_tool("functions", read)).structured_content
        while status["status"] != "waiting_for_input":  # long-polls, woken by the question
            seen = {**read, "seen_version": status["version"]}
            status = (await mcp.call_tool("functions", seen)).structured_content
        assert asked == ["Which separator?"] and status["question"] == "Which separator?"
        again = await mcp.call_tool("get_crew_function_call", {"call_id": call_id})
        assert asked == ["Which separator?"] * 2
        assert again.structured_content["status"] in ("running", "completed")
        assert await asyncio.wait_for(runner, 20) == "tsv"


async def test_a_question_with_choices_reaches_the_sdk_callback_as_an_enum_M2_M5_F11(
    gateway, alice_token, demo, report, runtime
):
    """M2 M5 F11: a question offering choices reaches the SDK's elicitation callback as a
    form whose answer is a string enum of them; the callback picks one, and that choice
    is the reply the execution gets. A task poll (Tasks extension) shows the same enum
    and lists the choices in its statusMessage."""
    schemas: list[dict] = []

    async def elicit(context, params):  # the SDK's elicitation callback
        schemas.append(params.requested_schema)
        choice = params.requested_schema["properties"]["answer"]["enum"][-1]
        return types.ElicitResult(action="accept", content={"answer": choice})

    choices = ("comma", "tab")
    runner = asyncio.create_task(run_report(runtime, demo, "Which separator?", choices))
    async with mcp_client(gateway.mcp_url, alice_token, elicitation_callback=elicit) as mcp:
        made = await mcp.call_tool(
            "functions", {"action": "call", "crew": "demo", "function": "report", "inputs": {}}
        )
        call_id = made.structured_content["call_id"]
        read = {"action": "status", "call_id": call_id, "wait_seconds": 3}
        status = (await mcp.call_tool("functions", read)).structured_content
        while not schemas:  # long-polls until the question is asked, then elicits
            seen = {**read, "seen_version": status["version"]}
            status = (await mcp.call_tool("functions", seen)).structured_content
        assert await asyncio.wait_for(runner, 20) == "tab"
    (schema,) = schemas
    assert schema["required"] == ["answer"]
    assert schema["properties"]["answer"]["type"] == "string"
    assert schema["properties"]["answer"]["enum"] == list(choices)

    tasks = TasksClient(lambda key, request: _pick_first(request))
    runner = asyncio.create_task(run_report(runtime, demo, "Which separator?", choices))
    async with mcp_client(gateway.mcp_url, alice_token, extensions=[tasks]) as mcp:
        await mcp.call_tool("functions", {"action": "call", "crew": "demo",
                                          "function": "report", "inputs": {}})  # fmt: skip
        assert await asyncio.wait_for(runner, 20) == "comma"
    waiting = next(t for t in tasks.seen if t["status"] == "input_required")
    assert waiting["statusMessage"] == "Which separator?\nAnswer with one of: comma, tab"
    (request,) = waiting["inputRequests"].values()
    assert request["params"]["requestedSchema"]["properties"]["answer"]["enum"] == list(choices)


async def _pick_first(request: dict) -> dict:
    """A tasks client's answer: the first choice the form offers."""
    first = request["params"]["requestedSchema"]["properties"]["answer"]["enum"][0]
    return {"action": "accept", "content": {"answer": first}}


async def test_clients_without_the_extension_see_todays_results_and_tasks_are_A3_M1_M4(
    gateway, alice_token, make_token, demo, report
):
    """M1 M4 A3: a client that did not declare the extension gets the receipt of today
    (no task) and no elicitation, and its tasks/get is refused -32021; another user's
    tasks/get of alice's call is invalid params (not found, A3); tasks/cancel cancels;
    the server's instructions say which tool returns a task."""
    bob_token = await make_token("user:bob", label="bob")
    async with mcp_client(gateway.mcp_url, alice_token) as plain:
        assert "task" in (plain.session.instructions or "")
        made = await plain.call_tool(
            "functions", {"action": "call", "crew": "demo", "function": "report", "inputs": {}}
        )
        assert not made.is_error and made.structured_content["status"] == "running"
        call_id = made.structured_content["call_id"]
        get = GetTask(params=TaskIdParams(taskId=call_id))
        with pytest.raises(MCPError) as refused:
            await send(plain.session, get)
        assert refused.value.code == -32021

    tasks = TasksClient()
    async with mcp_client(gateway.mcp_url, bob_token, extensions=[tasks]) as bob:
        with pytest.raises(MCPError) as hidden:
            await send(bob.session, get)
        assert hidden.value.code == -32602 and call_id in hidden.value.message
    async with mcp_client(gateway.mcp_url, alice_token, extensions=[tasks]) as alice:
        assert (await send(alice.session, get))["status"] == "working"
        cancel = CancelTask(params=TaskIdParams(taskId=call_id))
        await send(alice.session, cancel)
        task = await send(alice.session, get)
        assert task["status"] == "cancelled" and task["statusMessage"]
