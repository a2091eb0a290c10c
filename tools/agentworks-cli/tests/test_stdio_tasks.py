"""`agentworks mcp stdio` serves calls as tasks, questions as elicitations and files as
resources as `/mcp` does (M1, M2, M3, M5): the official SDK client over stdio, with the
Tasks client extension."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import mcp_types as types
from mcp import Client, StdioServerParameters

from agentworks.client import FunctionsClient
from tests.fixtures.mcp_tasks_client import EXTENSION, TasksClient, resource_text

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


async def run_report(runtime: FunctionsClient, demo: str, question: str) -> str:
    """Run one execution: ask `question`, write the answer's file and result."""
    execution = await runtime.claim_execution([demo], wait_seconds=20)
    assert execution is not None
    call_id = execution.call_id
    asked = await runtime.ask_input(call_id, "q1", question, wait_seconds=25)
    await runtime.upload_file(call_id, "report.txt", f"format={asked.reply}\n".encode())
    await runtime.upload_file(call_id, "result.json", json.dumps({"format": asked.reply}).encode())
    await runtime.finish_execution(call_id, final_message=f"wrote {asked.reply}")
    return asked.reply


async def test_the_stdio_proxy_serves_tasks_elicitation_and_resources_M1_M2_M3_M5(
    gateway, alice_token, demo, functions, identity, runtime, tmp_path
):
    """M1 M2 M3 M5: over stdio a call is a task whose question is answered with
    tasks/update, the result comes back validated, its file is read as a resource; a
    status read from a client with elicitation asks the question through the SDK's
    callback."""
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo, "report", input_schema={"type": "object"}, allowed_callers=["user:*"],
            output_schema={"type": "object", "properties": {"format": {"type": "string"}},
                           "required": ["format"]},
        )  # fmt: skip

    async def answer(key: str, request: dict) -> dict:
        return {"action": "accept", "content": {"answer": "csv"}}

    async def elicit(context, params):
        return types.ElicitResult(action="accept", content={"answer": "tsv"})

    tasks = TasksClient(answer)
    server = StdioServerParameters(
        command=AGENTWORKS_BIN,
        args=["mcp", "stdio"],
        env={"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token},
        cwd=str(tmp_path),
    )
    call = {"action": "call", "crew": "demo", "function": "report", "inputs": {}}
    async with Client(
        server, read_timeout_seconds=5, extensions=[tasks], elicitation_callback=elicit
    ) as mcp:
        capabilities = mcp.session.server_capabilities
        assert capabilities is not None and EXTENSION in (capabilities.extensions or {})
        runner = asyncio.create_task(run_report(runtime, demo, "Which format?"))
        result = await mcp.call_tool("functions", call)
        assert await asyncio.wait_for(runner, 20) == "csv"
        assert not result.is_error, result.content
        assert result.structured_content["result"] == {"format": "csv"}
        assert "input_required" in [t["status"] for t in tasks.seen]
        link = next(
            b for b in result.content if b.type == "resource_link" and b.name == "report.txt"
        )
        read = await mcp.read_resource(str(link.uri))
        assert resource_text(read)[0] == "format=csv\n"

    async with Client(server, read_timeout_seconds=5, elicitation_callback=elicit) as mcp:
        runner = asyncio.create_task(run_report(runtime, demo, "Which separator?"))
        made = (await mcp.call_tool("functions", call)).structured_content
        assert made["status"] == "running"  # no extension: the receipt as before
        read_status = {"action": "status", "call_id": made["call_id"], "wait_seconds": 3}
        status = (await mcp.call_tool("functions", read_status)).structured_content
        while status["status"] != "completed":
            status = (await mcp.call_tool("functions", read_status)).structured_content
        assert status["result"] == {"format": "tsv"}
        assert await asyncio.wait_for(runner, 20) == "tsv"
