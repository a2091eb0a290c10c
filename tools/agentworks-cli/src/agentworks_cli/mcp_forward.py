"""What `agentworks mcp stdio` forwards to the gateway's `/mcp` as it is (M1-M3): calls
as tasks, questions as elicitations, files and transcripts as resources.

The gateway serves these on `/mcp` (2026-07-28, one POST per request); the proxy sends
each such request there with the caller's token and the stdio client's declared
capabilities, and gives back the gateway's answer unchanged: the same tasks, forms and
resources over stdio as over HTTP. Everything else goes through the HTTP API as before.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from agentworks_cli.api import ApiClient

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")


class AnyParams(types.RequestParams):
    """Params passed on as they came."""

    model_config = ConfigDict(extra="allow")


def declared(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The stdio client's capabilities that the gateway acts on: the Tasks extension and
    elicitation (as JSON)."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None:
        return {}
    out: dict[str, Any] = {}
    if capabilities.extensions and TASKS in capabilities.extensions:
        out["extensions"] = {TASKS: {}}
    if capabilities.elicitation is not None and ctx.protocol_version == VERSION:
        out["elicitation"] = {"form": {}}
    return out


async def forward(
    api: ApiClient, method: str, params: dict[str, Any], capabilities: dict[str, Any]
) -> dict[str, Any]:
    """One request to the gateway's `/mcp`; its result, or MCPError with its error."""
    params = {k: v for k, v in params.items() if k != "_meta"}
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "agentworks-cli", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    name = params.get("name", params.get("taskId", params.get("uri")))
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    wait = (params.get("arguments") or {}).get("wait_seconds") or 0
    try:
        response = await api.http.post(
            "/mcp", json=body, headers=headers, timeout=api.timeout + wait
        )
    except httpx.HTTPError as exc:  # unreachable gateway, timeout: the client asks again
        raise MCPError(
            types.INTERNAL_ERROR, f"cannot reach the gateway at {api.url}: {exc}"
        ) from exc
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        answer = json.loads(data[-1]) if data else {}
    else:
        answer = response.json()
    if "error" in answer:
        error = answer["error"]
        raise MCPError(error.get("code", types.INTERNAL_ERROR), error.get("message", ""),
                       error.get("data"))  # fmt: skip
    return answer.get("result") or {}


def wants_gateway(params: types.CallToolRequestParams, capabilities: dict[str, Any]) -> bool:
    """Whether a tool call is one the gateway may answer with a task or a form."""
    args = params.arguments or {}
    if params.name == "functions" and args.get("action") == "call":
        return "extensions" in capabilities
    reads = params.name == "get_crew_function_call" or args.get("action") == "status"
    return (
        reads
        and params.name in ("functions", "get_crew_function_call")
        and ("elicitation" in capabilities)
    )


def install(server: Server[Any], api: ApiClient) -> None:
    """Serve the Tasks extension's methods and the resources by forwarding them."""

    def forwarder(method: str) -> Any:
        async def handle(ctx: ServerRequestContext[Any, Any], params: AnyParams) -> dict:
            raw = params.model_dump(by_alias=True, exclude_none=True, mode="json")
            return await forward(api, method, raw, declared(ctx))

        return handle

    for method in TASK_METHODS:
        server.add_request_handler(method, AnyParams, forwarder(method))
    server.extensions[TASKS] = {}
    for method, params_type in (
        ("resources/list", types.PaginatedRequestParams),
        ("resources/templates/list", types.PaginatedRequestParams),
        ("resources/read", types.ReadResourceRequestParams),
    ):
        handle = forwarder(method)

        async def typed(
            ctx: ServerRequestContext[Any, Any], params: Any, handle: Any = handle
        ) -> dict:
            raw = AnyParams.model_validate(
                params.model_dump(by_alias=True, exclude_none=True, mode="json") if params else {}
            )
            return await handle(ctx, raw)  # type: ignore[no-any-return]

        server.add_request_handler(method, params_type, typed)
