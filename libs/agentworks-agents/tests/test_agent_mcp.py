"""The agent's MCP server (L2) on its own: a toolbox served over Streamable HTTP on a
Unix socket and through the stdio bridge, driven by the official MCP client.

The toolbox here is a small one made for the test (the real turn and execution tool
sets run against the services in tests/test_agent_mcp_runner.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agentworks.agents.agent_mcp import bridge
from agentworks.agents.agent_mcp.handout import CONFIG_FILE, SOCKET_FILE, serve_agent
from agentworks.agents.agent_mcp.server import Endpoint
from agentworks.agents.agent_tools import AgentTool, Toolbox, ToolError

pytestmark = pytest.mark.timeout(60)

ECHO = AgentTool(
    name="echo",
    title="Echo a text",
    description="Answers the text it is given.",
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1}},
        "required": ["text"],
        "additionalProperties": False,
    },
    output_schema={"type": "object", "properties": {"echo": {"type": "string"}}},
    read_only=True,
    destructive=False,
    idempotent=True,
)
REFUSE = AgentTool(
    name="refuse",
    title="Always refused",
    description="Refused, as a service would refuse it.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    output_schema=None,
    read_only=False,
    destructive=True,
    idempotent=False,
)


def read_json(path: pathlib.Path) -> Any:
    return json.loads(path.read_text())


def toolbox() -> Toolbox:
    async def echo(args: dict[str, Any]) -> dict[str, Any]:
        return {"echo": args["text"]}

    async def refuse(args: dict[str, Any]) -> dict[str, Any]:
        raise ToolError("the turn has ended with its lease", code="PERMISSION_DENIED")

    return Toolbox([(ECHO, echo), (REFUSE, refuse)])


@contextlib.asynccontextmanager
async def http_client(endpoint: Endpoint, token: str | None = None) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP on the endpoint's Unix socket."""
    http = httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(uds=str(endpoint.socket_path)),
        headers={"Authorization": f"Bearer {endpoint.token if token is None else token}"},
        timeout=10,
    )
    async with http, Client(streamable_http_client(endpoint.url, http_client=http)) as client:
        yield client


async def test_the_endpoint_lists_the_toolbox_and_runs_its_calls_over_a_unix_socket_L2(tmp_path):
    """L2: tools/list gives each tool's title, description, schemas and hints; a call
    returns structured content; a refusal is isError with the refusal's text and code;
    bad arguments are refused naming the field."""
    async with Endpoint(toolbox(), socket_path=tmp_path / "mcp.sock") as endpoint:
        assert os.stat(tmp_path / "mcp.sock").st_mode & 0o777 == 0o600
        async with http_client(endpoint) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == {"echo", "refuse"}
            echo = listed["echo"]
            assert echo.title == "Echo a text" and echo.input_schema == ECHO.input_schema
            assert echo.output_schema == ECHO.output_schema
            hints = echo.annotations
            assert hints is not None
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
                True,
                False,
                True,
            )
            assert listed["refuse"].annotations.destructive_hint is True  # type: ignore[union-attr]
            answered = await client.call_tool("echo", {"text": "hi"})
            assert not answered.is_error and answered.structured_content == {"echo": "hi"}
            refused = await client.call_tool("refuse", {})
            assert refused.is_error
            assert refused.content[0].text == "the turn has ended with its lease"  # type: ignore[union-attr]
            message = "the turn has ended with its lease"
            assert refused.structured_content == {
                "error": {"code": "PERMISSION_DENIED", "message": message}
            }
            bad = await client.call_tool("echo", {"text": "", "extra": 1})
            assert bad.is_error
            assert "unknown field extra" in bad.content[0].text  # type: ignore[union-attr]


async def test_the_endpoint_needs_its_token_and_stops_with_its_block_L2_T3(tmp_path):
    """L2 T3: a request without the endpoint's bearer token is refused 401; once the
    `async with` (the turn or execution) ends, the socket is gone and nothing answers."""
    path = tmp_path / "mcp.sock"
    async with Endpoint(toolbox(), socket_path=path) as endpoint:
        transport = httpx2.AsyncHTTPTransport(uds=str(path))
        async with httpx2.AsyncClient(transport=transport, timeout=5) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            for headers in ({}, {"Authorization": "Bearer not-the-token"}):
                answer = await http.post(endpoint.url, json=body, headers=headers)
                assert answer.status_code == 401, answer.text
    assert not path.exists()
    with pytest.raises(OSError):
        bridge.connect_unix(path, timeout=2)


async def test_the_stdio_bridge_relays_an_mcp_client_to_the_endpoint_from_the_config_L2(
    tmp_path,
):
    """L2: `serve_agent` writes the `mcpServers` config (0600) in the folder; an MCP
    client launching its `agentworks` entry (the stdio bridge, standard library only)
    lists and calls the tools; after the block the config and socket are gone and the
    bridge answers a request with an error saying the endpoint cannot be reached."""
    async with serve_agent(toolbox(), tmp_path, sandboxed=False) as env:
        config_path = pathlib.Path(env["AGENTWORKS_MCP_CONFIG"])
        assert config_path == tmp_path / CONFIG_FILE
        assert os.stat(config_path).st_mode & 0o777 == 0o600
        entry = read_json(config_path)["mcpServers"]["agentworks"]
        assert json.loads(env["AGENTWORKS_MCP_COMMAND"]) == [entry["command"], *entry["args"]]
        assert env["AGENTWORKS_MCP_SOCKET"] == str(tmp_path / SOCKET_FILE)
        assert "AGENTWORKS_MCP_TOKEN" not in env  # in the file only
        params = StdioServerParameters(
            command=entry["command"], args=entry["args"], env=entry["env"], cwd=str(tmp_path)
        )
        for mode in ("auto", "legacy"):
            async with Client(params, mode=mode) as client:
                assert {t.name for t in (await client.list_tools()).tools} == {"echo", "refuse"}
                answered = await client.call_tool("echo", {"text": f"via {mode}"})
                assert answered.structured_content == {"echo": f"via {mode}"}
        # The bridge run as AGENTWORKS_MCP_COMMAND says, finding the endpoint in the file.
        command = json.loads(env["AGENTWORKS_MCP_COMMAND"])
        by_file = StdioServerParameters(
            command=command[0], args=command[1:], env={"AGENTWORKS_MCP_CONFIG": str(config_path)}
        )
        async with Client(by_file) as client:
            assert (await client.call_tool("echo", {"text": "x"})).structured_content == {
                "echo": "x"
            }
    assert not (tmp_path / CONFIG_FILE).exists() and not (tmp_path / SOCKET_FILE).exists()
    late = bridge.Bridge(socket_path=str(tmp_path / SOCKET_FILE), token="t")
    written: list[str] = []
    late.write = written.append  # type: ignore[method-assign,assignment]
    late.relay(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}')
    (error,) = written
    assert error["id"] == 7 and "cannot be reached" in error["error"]["message"]  # type: ignore[index]


def test_the_bridge_imports_nothing_outside_the_standard_library_L2(tmp_path):
    """L2: the bridge runs on the system's Python in a sandbox that shows no package:
    `python -I -S bridge.py` without an endpoint says what is missing, exit 2."""
    import subprocess

    done = subprocess.run(
        [os.path.realpath(sys.executable), "-I", "-S", bridge.__file__, "stdio"],
        capture_output=True,
        text=True,
        timeout=30,
        env={},
    )
    assert done.returncode == 2, done.stderr
    assert "no AgentWorks MCP endpoint: set AGENTWORKS_MCP_SOCKET" in done.stderr


async def test_the_endpoint_serves_loopback_streamable_http_with_its_bearer_token_L2():
    """L2: without a socket, the endpoint listens on 127.0.0.1 (a free port); its client
    configuration is the `url` form with the bearer header, which the SDK's client uses
    as it is; a request without the token is refused 401."""
    from agentworks.agents.agent_mcp.handout import client_config

    async with Endpoint(toolbox()) as endpoint:
        assert endpoint.url == f"http://127.0.0.1:{endpoint.port}/mcp"
        entry = client_config(endpoint, ["unused"])["mcpServers"]["agentworks"]
        assert entry == {
            "type": "http",
            "url": endpoint.url,
            "headers": {"Authorization": f"Bearer {endpoint.token}"},
        }
        http = httpx2.AsyncClient(headers=entry["headers"], timeout=10)
        async with http, Client(streamable_http_client(entry["url"], http_client=http)) as client:
            answered = await client.call_tool("echo", {"text": "over tcp"})
            assert answered.structured_content == {"echo": "over tcp"}
        async with httpx2.AsyncClient(timeout=5) as bare:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            assert (await bare.post(endpoint.url, json=body)).status_code == 401


def a_turn() -> Any:
    """A turn as the endpoint's resources read it: one message delivered."""
    from types import SimpleNamespace

    from agentworks.messaging.v1 import messaging_pb2 as m

    delivery = m.Delivery(
        delivery_id="d1",
        kind=m.DELIVERY_KIND_MESSAGE,
        message=m.Message(message_id="m1", sender="user:alice", text="hello"),
    )
    return SimpleNamespace(
        turn_id="t1",
        conversation_id="c1",
        target="crew:demo",
        reply_inbox_id="i1",
        deliveries=[delivery],
    )


async def test_the_endpoint_gives_instructions_and_the_turns_input_as_a_resource_L11(tmp_path):
    """L11: a turn's endpoint gives the host instructions naming the input resource and
    how to answer; resources/list lists agentworks://turn/input, whose JSON is the turn
    file's document (turn_input); an unknown URI is refused naming the ones there are;
    the same through the stdio bridge, in both protocol eras."""
    from mcp.shared.exceptions import MCPError

    from agentworks.agents.agent_mcp.resources import (
        TURN_INPUT,
        AgentResource,
        turn_input,
        turn_instructions,
    )

    turn = a_turn()

    async def read() -> str:
        return json.dumps(turn_input(turn))

    resource = AgentResource(TURN_INPUT, "turn_input", "This turn's input", "The turn.", read)
    instructions = turn_instructions(turn)
    assert TURN_INPUT in instructions and "send_message" in instructions
    assert "continue_conversation" in instructions
    async with serve_agent(
        toolbox(), tmp_path, sandboxed=False, instructions=instructions, resources=[resource]
    ) as env:
        entry = read_json(pathlib.Path(env["AGENTWORKS_MCP_CONFIG"]))["mcpServers"]["agentworks"]
        params = StdioServerParameters(
            command=entry["command"], args=entry["args"], env=entry["env"], cwd=str(tmp_path)
        )
        for mode in ("auto", "legacy"):
            async with Client(params, mode=mode) as client:
                assert client.instructions == instructions, mode
                listed = (await client.list_resources()).resources
                assert [(str(r.uri), r.name, r.mime_type) for r in listed] == [
                    (TURN_INPUT, "turn_input", "application/json")
                ]
                (content,) = (await client.read_resource(TURN_INPUT)).contents
                shown = json.loads(content.text)  # type: ignore[union-attr]
                assert shown["turn_id"] == "t1" and shown["reply_inbox_id"] == "i1"
                (delivery,) = shown["deliveries"]
                assert delivery["kind"] == "message"
                assert delivery["message"]["text"] == "hello"
                with pytest.raises(MCPError, match="agentworks://turn/input"):
                    await client.read_resource("agentworks://turn/other")
