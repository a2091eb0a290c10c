"""MCP-native long work on the gateway's `/mcp` (M1-M4): calls as tasks (the Tasks
extension), questions as elicitations, files and transcripts as resources.

`install` adds them to the MCP server `mcp_server.build_http_server` builds: the
extension's methods and its `tools/call` interceptor (the SDK's extension API, applied
to the low-level server as `MCPServer` applies it), `subscriptions/listen` for task
notifications, and the resource handlers. A client that declares neither the
extension nor elicitation sees the tools as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.extension import compose_tool_call_handler

from agentworks.core.identity import Identity
from agentworks_gateway.mcp_tasks.access import Access, Ctx
from agentworks_gateway.mcp_tasks.resources import CallResources
from agentworks_gateway.mcp_tasks.tasks import CallTasks

__all__ = ["CallResources", "CallTasks", "install"]


def install(server: Server[Any], gateway: Any, caller: Callable[[Ctx], Identity]) -> None:
    """Serve tasks, elicitations and resources on `server`, as each request's caller."""
    calls = Access(gateway, caller)
    extension = CallTasks(calls)
    for method in extension.methods():
        server.add_request_handler(method.method, method.params_type, method.handler)
    server.extensions[extension.identifier] = extension.settings()
    call_tool = server.get_request_handler("tools/call")
    assert call_tool is not None
    server.add_request_handler(
        "tools/call",
        types.CallToolRequestParams,
        compose_tool_call_handler([extension], call_tool.handler),
    )
    server.add_request_handler(
        "subscriptions/listen", types.SubscriptionsListenRequestParams, extension.listen
    )
    resources = CallResources(calls)
    server.add_request_handler("resources/list", types.PaginatedRequestParams, resources.list)
    server.add_request_handler(
        "resources/templates/list", types.PaginatedRequestParams, resources.templates
    )
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, resources.read)
