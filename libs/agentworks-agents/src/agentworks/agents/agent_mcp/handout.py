"""What a turn's or execution's process gets to reach its MCP endpoint (L2).

`serve_agent(toolbox, folder, socket=...)` serves the endpoint on a Unix socket (the
command runner's: in a folder of its own, bound into the item's sandbox alone at
`/run/agentworks/mcp.sock`) for as long as its `async with` lasts, and writes the usual
client configuration in the item's folder,

    {"mcpServers": {"agentworks": {
        "command": "/usr/bin/python3",
        "args": ["-I", "-S", "/run/agentworks/mcp_bridge.py", "stdio"],
        "env": {"AGENTWORKS_MCP_SOCKET": "...", "AGENTWORKS_MCP_TOKEN": "..."}}}}

(mode 0600, the process's own), and yields the variables the process gets:
`AGENTWORKS_MCP_CONFIG` (that file), `AGENTWORKS_MCP_COMMAND` (the bridge's command line
as JSON: run as it is, it finds the endpoint through the file) and
`AGENTWORKS_MCP_SOCKET` (for a client that speaks Streamable HTTP over a Unix socket
itself, with the bearer token of the file's `env`). The token is in the file only, not
in the environment, which the process's children inherit. When the item ends, the
endpoint stops, and the socket and the file are removed (before the folder is uploaded).
The configuration names the socket as the process sees it.

`turn_offer(ctx)` and `execution_offer(ctx)` are what an item's endpoint serves: its
tools acting with its capability, its instructions and its resources (`resources`, L11).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentworks.agents.agent_mcp import bridge
from agentworks.agents.agent_mcp.resources import (
    AgentResource,
    execution_instructions,
    execution_resources,
    turn_instructions,
    turn_resources,
)
from agentworks.agents.agent_mcp.server import Endpoint
from agentworks.agents.agent_tools import Toolbox

CONFIG_FILE = ".agentworks-mcp.json"
SOCKET_FILE = ".agentworks-mcp.sock"
BRIDGE_PATH = bridge.SANDBOX_PATH

CONFIG_VARIABLE = "AGENTWORKS_MCP_CONFIG"
COMMAND_VARIABLE = "AGENTWORKS_MCP_COMMAND"
VARIABLES = (
    CONFIG_VARIABLE,
    COMMAND_VARIABLE,
    bridge.SOCKET_VARIABLE,
    bridge.TOKEN_VARIABLE,
    bridge.URL_VARIABLE,
)
SERVER_NAME = "agentworks"


def bridge_command(*, sandboxed: bool) -> list[str]:
    """The bridge's command line: the system's Python, which every sandbox shows, on
    the bridge file (bound into the sandbox at BRIDGE_PATH); no package needed."""
    python = os.path.realpath(sys.executable)
    path = BRIDGE_PATH if sandboxed else os.path.abspath(bridge.__file__)
    return [python, "-I", "-S", path, "stdio"]


def client_config(
    endpoint: Endpoint, command: list[str], *, socket: str | None = None
) -> dict[str, Any]:
    """The `mcpServers` configuration an MCP client reads; `socket`: the endpoint's
    socket as the client sees it (default where it is)."""
    if endpoint.socket_path is None:
        entry: dict[str, Any] = {
            "type": "http",
            "url": endpoint.url,
            "headers": {"Authorization": f"Bearer {endpoint.token}"},
        }
    else:
        entry = {
            "command": command[0],
            "args": command[1:],
            "env": {
                bridge.SOCKET_VARIABLE: socket or str(endpoint.socket_path),
                bridge.TOKEN_VARIABLE: endpoint.token,
            },
        }
    return {"mcpServers": {SERVER_NAME: entry}}


def _write_private(path: pathlib.Path, text: str, owner: int | None) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        if owner is not None and owner != os.geteuid():
            os.fchown(descriptor, owner, -1)
        os.write(descriptor, text.encode())
    finally:
        os.close(descriptor)


@contextlib.asynccontextmanager
async def serve_agent(
    toolbox: Toolbox,
    folder: pathlib.Path,
    *,
    socket: tuple[pathlib.Path, str] | None = None,
    owner: int | None = None,
    sandboxed: bool = True,
    instructions: str | None = None,
    resources: Sequence[AgentResource] = (),
) -> AsyncIterator[dict[str, str]]:
    """Serve `toolbox` (with `instructions` and `resources`, L11) to the process that
    runs in `folder` (an absolute path, as the process sees it too); yields its
    variables. `socket`: where the endpoint listens on the host and where the process
    sees it (`ProcessRunner.mcp_socket`); default a socket in `folder`."""
    host, inside = socket or (folder / SOCKET_FILE, str(folder / SOCKET_FILE))
    config_path = folder / CONFIG_FILE
    endpoint = Endpoint(
        toolbox, socket_path=host, owner=owner, instructions=instructions, resources=resources
    )
    async with endpoint:
        command = bridge_command(sandboxed=sandboxed)
        try:
            config = client_config(endpoint, command, socket=inside)
            _write_private(config_path, json.dumps(config), owner)
            yield {
                CONFIG_VARIABLE: str(config_path),
                COMMAND_VARIABLE: json.dumps(command),
                bridge.SOCKET_VARIABLE: inside,
            }
        finally:
            with contextlib.suppress(FileNotFoundError):
                config_path.unlink()


def turn_tools(ctx: Any) -> Toolbox:
    """The tools of a turn (`TurnContext`), acting with its capability only (T3)."""
    from agentworks.agents.agent_mcp.acting import capability_view
    from agentworks.agents.agent_tools import turn_toolbox

    return turn_toolbox(capability_view(ctx, f"turn {ctx.turn_id}"))


def execution_tools(ctx: Any) -> Toolbox:
    """The tools of an execution (`ExecutionContext`), acting with its capability only."""
    from agentworks.agents.agent_mcp.acting import capability_view
    from agentworks.agents.agent_tools import execution_toolbox

    return execution_toolbox(capability_view(ctx, f"execution {ctx.call_id}"))


@dataclass(frozen=True)
class Offer:
    """What one item's endpoint serves: its tools, instructions and resources (L11)."""

    toolbox: Toolbox
    instructions: str
    resources: list[AgentResource]

    def serve(self, folder: pathlib.Path, **kwargs: Any) -> Any:
        """`serve_agent` with this offer (kwargs: its socket, owner and sandboxed)."""
        return serve_agent(
            self.toolbox,
            folder,
            instructions=self.instructions,
            resources=self.resources,
            **kwargs,
        )


def turn_offer(ctx: Any) -> Offer:
    """A turn's endpoint: its tools, instructions and resources, with its capability."""
    toolbox = turn_tools(ctx)
    return Offer(toolbox, turn_instructions(ctx), turn_resources(ctx, toolbox))


def execution_offer(ctx: Any) -> Offer:
    """An execution's endpoint: its tools, instructions and resources."""
    return Offer(execution_tools(ctx), execution_instructions(ctx), execution_resources(ctx))
