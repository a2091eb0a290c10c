"""`agentworks mcp stdio`: the gateway's MCP tools for local clients that start a command (G1)."""

from __future__ import annotations

import argparse
from typing import Any

from agentworks_cli.api import ApiClient


async def stdio(api: ApiClient, args: argparse.Namespace) -> None:
    from agentworks_cli.mcp_stdio import serve_stdio  # the MCP SDK only for this command

    await serve_stdio(api)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `mcp` to the `agentworks` parser."""
    mcp = commands.add_parser("mcp", help="serve MCP to local clients")
    mcp_cmds = mcp.add_subparsers(title="transports", metavar="TRANSPORT", required=True)
    stdio_cmd = mcp_cmds.add_parser(
        "stdio",
        parents=[common],
        help="an MCP server on stdin/stdout that forwards tool calls to the gateway",
        description="Serve the gateway's MCP tools over stdio, for MCP clients that start "
        "a command. Each tool call goes to the gateway's HTTP API with your token.",
    )
    stdio_cmd.set_defaults(run=stdio)
