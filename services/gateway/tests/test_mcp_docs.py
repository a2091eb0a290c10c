"""docs/mcp.md's tasks and elicitation exchanges, sent to `/mcp` as written (M4, M1, M2).

Each `→` block of the section is posted as it stands (the example call_id replaced by
the real one); each `←` block must be part of the answer: every key it shows is there
with the value it shows, except the times and the status text, which differ per run.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentworks.client import FunctionsClient

DOC = Path(__file__).resolve().parents[3] / "docs" / "mcp.md"
EXAMPLE_CALL = "0f8e5c0a-8a9b-4c1e-9d7a-2b3c4d5e6f70"
# Values that differ per run: times, the JSON text of a status, a file's hash.
VARYING = {"createdAt", "lastUpdatedAt", "text"}
REPORT_SCHEMA = {
    "type": "object",
    "properties": {"format": {"type": "string"}, "rows": {"type": "integer"}},
    "required": ["format", "rows"],
}


def exchanges(heading: str) -> list[tuple[dict, dict]]:
    """The (request, response) pairs of a docs/mcp.md section, in order."""
    text = DOC.read_text()
    section = text.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    blocks = re.findall(r"^(→|←).*?\n\n```jsonc\n(.*?)```", section, re.S | re.M)
    pairs = []
    for (arrow_in, request), (arrow_out, response) in zip(blocks[::2], blocks[1::2], strict=True):
        assert (arrow_in, arrow_out) == ("→", "←")
        pairs.append((json.loads(request), json.loads(response)))
    return pairs


def contains(actual: Any, shown: Any, where: str = "") -> None:
    """Every key `shown` has, `actual` has with the same value (VARYING keys: present)."""
    if isinstance(shown, dict):
        assert isinstance(actual, dict), where
        for key, value in shown.items():
            assert key in actual, f"{where}.{key} missing from {actual}"
            if key not in VARYING:
                contains(actual[key], value, f"{where}.{key}")
    elif isinstance(shown, list):
        assert isinstance(actual, list) and len(actual) == len(shown), (where, actual)
        for i, (a, s) in enumerate(zip(actual, shown, strict=True)):
            contains(a, s, f"{where}[{i}]")
    else:
        assert actual == shown, (where, actual, shown)


async def post(client: httpx.AsyncClient, request: dict) -> dict:
    """One 2026-07-28 request to /mcp with the headers the protocol asks for."""
    params = request["params"]
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": request["method"],
    }
    if name := params.get("name", params.get("taskId")):
        headers["Mcp-Name"] = name
    response = await client.post("/mcp", json=request, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def real(block: dict, call_id: str) -> Any:
    return json.loads(json.dumps(block).replace(EXAMPLE_CALL, call_id))


@pytest.fixture
async def report(functions, identity, demo) -> str:
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo, "report", input_schema={"type": "object"}, output_schema=REPORT_SCHEMA,
            allowed_callers=["user:*"],
        )  # fmt: skip
    return "report"


async def run_report(
    runtime: FunctionsClient, demo: str, answered: asyncio.Event, choices: tuple[str, ...] = ()
) -> None:
    """The report function's runtime: asks, and once the test has read what the answer
    looks like (`answered`; the doc shows the call running again, which a runtime that
    finished at once would race), writes the files and finishes."""
    execution = await runtime.claim_execution([demo], wait_seconds=20)
    assert execution is not None
    call_id = execution.call_id
    asked = await runtime.ask_input(call_id, "q", "Which format?", wait_seconds=25, choices=choices)
    await asyncio.wait_for(answered.wait(), 20)
    await runtime.upload_file(call_id, "report.txt", f"format={asked.reply}\n".encode())
    result = {"format": asked.reply, "rows": 3}
    await runtime.upload_file(call_id, "result.json", json.dumps(result).encode())
    await runtime.finish_execution(call_id, final_message=f"wrote {asked.reply}")


async def test_the_docs_tasks_and_elicitation_exchanges_run_as_written_M4_M1_M2(
    gateway, api, alice_token, demo, report, runtime, functions, identity
):
    """M4 M1 M2: docs/mcp.md's two exchanges, request by request (the second question
    offers choices: its form's answer is an enum)."""
    client = api(alice_token)
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as alice:

        async def reach(call_id: str, state: str) -> None:
            await alice.wait(call_id, until=[state], timeout=20)

        tasks = exchanges("A tasks exchange")
        (call, created), (get, waiting), (update, ack), (last, completed) = tasks
        answer = await post(client, call)
        # The runtime starts after the answer: a runtime already waiting could claim the
        # call and ask before the task is read for the answer (input_required, not the
        # doc's working).
        answered = asyncio.Event()
        runner = asyncio.create_task(run_report(runtime, demo, answered))
        call_id = answer["result"]["taskId"]
        contains(answer, real(created, call_id))
        await reach(call_id, "waiting_for_input")
        contains(await post(client, real(get, call_id)), real(waiting, call_id))
        contains(await post(client, real(update, call_id)), real(ack, call_id))
        answered.set()
        await asyncio.wait_for(runner, 20)
        contains(await post(client, real(last, call_id)), real(completed, call_id))

        (status, asked), (retry, reply) = exchanges("An elicitation exchange")
        answered = asyncio.Event()
        runner = asyncio.create_task(run_report(runtime, demo, answered, ("csv", "json")))
        made = await alice.call(demo, "report", {})
        await reach(made.call_id, "waiting_for_input")
        contains(await post(client, real(status, made.call_id)), real(asked, made.call_id))
        contains(await post(client, real(retry, made.call_id)), real(reply, made.call_id))
        answered.set()
        await asyncio.wait_for(runner, 20)


async def test_listen_sends_a_task_at_each_change_of_the_call_until_it_ends_M1(
    gateway, api, alice_token, demo, report, functions, identity
):
    """M1: subscriptions/listen with taskIds acknowledges them, then sends
    notifications/tasks (a full task) as the call changes, the last one cancelled."""
    client = api(alice_token)
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as alice:
        made = await alice.call(demo, "report", {})
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}
            },
        }
        request = {
            "jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [made.call_id]}, "_meta": meta},
        }  # fmt: skip
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "subscriptions/listen",
        }
        frames: list[dict] = []
        async with client.stream("POST", "/mcp", json=request, headers=headers) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                frames.append(json.loads(line[5:]))
                frame = frames[-1]
                if frame.get("method") == "notifications/tasks" and (
                    frame["params"]["status"] == "working"
                ):
                    await alice.cancel(made.call_id)
                if "result" in frames[-1] or "error" in frames[-1]:
                    break
    methods = [f.get("method") for f in frames]
    assert methods[0] == "notifications/subscriptions/acknowledged", frames
    assert frames[0]["params"]["notifications"]["taskIds"] == [made.call_id]
    tasks = [f["params"] for f in frames if f.get("method") == "notifications/tasks"]
    assert [t["status"] for t in tasks] == ["working", "cancelled"]
    assert all(t["taskId"] == made.call_id for t in tasks)
    assert frames[-1]["id"] == 9 and "result" in frames[-1]
