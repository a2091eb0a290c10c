"""The tool registry: one definition per tool, served over MCP (G1, G2) and `/api` alike.

Each tool has a name, a description, a JSON Schema for its arguments and a handler
`handler(gateway, identity, args) -> dict`. MCP `tools/call`, `POST /api/v1/tools/<name>`
(and through it the CLI's stdio proxy) all go through `call_tool`, so the arguments, the
structured result and the error texts are the same everywhere. Handlers only translate
between JSON and the typed clients; the services own every business rule.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog
from prometheus_client import Counter, Histogram

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks_gateway.admission import CALLER
from agentworks_gateway.tools.arguments import check_arguments
from agentworks_gateway.tools.declarations import DECLARATION_TOOLS
from agentworks_gateway.tools.endpoints import ENDPOINTS_TOOL
from agentworks_gateway.tools.functions import FUNCTION_TOOLS
from agentworks_gateway.tools.host_schemas import function_calling_faults
from agentworks_gateway.tools.listing import LIST_TOOL
from agentworks_gateway.tools.messages import MESSAGE_TOOLS
from agentworks_gateway.tools.operator import OPERATOR_TOOLS
from agentworks_gateway.tools.pauses import PAUSE_TOOL
from agentworks_gateway.tools.runtime_credentials import RUNTIME_CREDENTIALS_TOOL
from agentworks_gateway.tools.schedules import SCHEDULE_TOOL
from agentworks_gateway.tools.toolkit import Tool
from agentworks_gateway.tools.transcript import TRANSCRIPT_TOOL
from agentworks_gateway.tools.wake_ups import WAKE_UP_TOOL
from agentworks_gateway.tools.webhooks import WEBHOOK_TOOL

log = structlog.get_logger("agentworks.gateway.tools")

TOOL_CALLS = Counter(
    "agentworks_gateway_tool_calls_total",
    "Tool calls served by the gateway, by tool, surface (mcp/api) and outcome (ok, a status "
    "name, or cancelled: cut at the end of a drain, or its client went away).",
    ["tool", "surface", "outcome"],
)
TOOL_DURATION = Histogram(
    "agentworks_gateway_tool_duration_seconds",
    "Tool call handling time (long-polls included), by tool.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        *MESSAGE_TOOLS,
        *OPERATOR_TOOLS,
        *FUNCTION_TOOLS,
        LIST_TOOL,
        TRANSCRIPT_TOOL,
        *DECLARATION_TOOLS,
        WAKE_UP_TOOL,
        SCHEDULE_TOOL,
        PAUSE_TOOL,
        WEBHOOK_TOOL,
        ENDPOINTS_TOOL,
        RUNTIME_CREDENTIALS_TOOL,
    )
}
for _tool in TOOLS.values():
    _ = _tool.validator  # compile (and check: flat, a rule per action) every schema at import
    _faults = function_calling_faults(_tool.published_schema) if _tool.mcp else []
    if _faults:  # what hosts' function calling would refuse is never served over MCP
        raise ValueError(f"the MCP schema of {_tool.name} is not portable: {'; '.join(_faults)}")


def mcp_tools() -> list[Tool]:
    """The tools served over MCP, in a stable order."""
    return [t for t in TOOLS.values() if t.mcp]


def find_tool(name: str, *, mcp: bool) -> Tool:
    """The tool called `name` on this surface, or NotFound naming the ones there are."""
    tool = TOOLS.get(name)
    if tool is None or (mcp and not tool.mcp):
        available = [t.name for t in (mcp_tools() if mcp else TOOLS.values())]
        raise errors.NotFound(
            f"unknown tool {name!r}: the tools are {', '.join(available)}",
            reason=errors.Reason.NOT_FOUND,
            metadata=errors.kind_meta("tool", name),
        )
    return tool


async def call_tool(
    gateway: Any, identity: Identity, name: str, args: Any, *, mcp: bool
) -> dict[str, Any]:
    """Run one tool call as `identity`; raises AgentWorksError subclasses on refusal."""
    started = time.monotonic()
    outcome = "ok"
    caller = CALLER.set(identity.principal)  # whose share a long-poll takes (B7)
    try:
        tool = find_tool(name, mcp=mcp)
        return await tool.handler(gateway, identity, check_arguments(tool, args))
    except errors.AgentWorksError as exc:
        outcome = exc.code.name
        raise
    except Exception:
        outcome = "INTERNAL"
        raise
    except asyncio.CancelledError:
        # The drain ended with the call still running, or its client went away.
        outcome = "cancelled"
        raise
    finally:
        CALLER.reset(caller)
        elapsed = time.monotonic() - started
        if name in TOOLS:  # unknown names stay out of the label set
            surface = "mcp" if mcp else "api"
            TOOL_CALLS.labels(name, surface, outcome).inc()
            TOOL_DURATION.labels(name).observe(elapsed)
        log.info(
            "tool.called",
            tool=name,
            action=args.get("action") if isinstance(args, dict) else None,
            principal=identity.principal,
            surface="mcp" if mcp else "api",
            outcome=outcome,
            ms=round(elapsed * 1000, 1),
        )
