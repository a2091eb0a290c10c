"""Open streams end when their token does (A1, G1, M1, N1), as an attacker sees them: a
token revoked while a stream is open gets nothing more on it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentworks.client import FunctionsClient

TOKENS = "/api/v1/tools/tokens"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "subscriptions/listen",
}
MCP_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    },
}


@pytest.mark.parametrize("change", [True, False], ids=["a-change-after", "nothing-after"])
async def test_an_mcp_listen_ends_when_its_token_is_revoked_on_another_replica_A1_G1_M1(
    start_gateway, api, operator_token, demo, functions, identity, change
):
    """A1 G1 M1, as an attacker: carol listens (`subscriptions/listen`) to her call's task
    on one replica; the operator revokes her token on the other (and the call is then
    cancelled, or nothing more happens: the re-check alone ends it). The listen ends with
    a JSON-RPC error naming the revocation (CREDENTIALS_REVOKED) and the call's
    cancellation never reaches her."""
    settings = {"GATEWAY_STREAM_RECHECK_SECONDS": "0.3"}
    first, second = await start_gateway(**settings), await start_gateway(**settings)
    operator = api(operator_token, base_url=second.url)
    created = await operator.post(TOKENS, json={"action": "create", "principal": "user:carol"})
    token, token_id = created.json()["token"], created.json()["token_id"]
    carol = api(token, base_url=first.url)
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo, "report", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
    async with FunctionsClient(functions.address, identity=identity("user:carol")) as caller:
        made = await caller.call(demo, "report", {})
        request = {
            "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [made.call_id]}, "_meta": MCP_META},
        }  # fmt: skip
        frames: list[dict[str, Any]] = []
        async with carol.stream("POST", "/mcp", json=request, headers=MCP_HEADERS) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                frames.append(json.loads(line[5:]))
                if frames[-1].get("params", {}).get("status") == "working":
                    revoked = await operator.post(
                        TOKENS, json={"action": "revoke", "token_id": token_id}
                    )
                    assert revoked.status_code == 200, revoked.text
                    if change:
                        await caller.cancel(made.call_id)  # a change after the revocation
            # The stream ended (the loop above ran out): nothing after the error.
        if not change:
            await caller.cancel(made.call_id)  # ended by the re-check alone
    statuses = [f["params"]["status"] for f in frames if f.get("method") == "notifications/tasks"]
    assert statuses == ["working"], frames
    last = frames[-1]
    assert last["id"] == 7 and "error" in last, frames
    assert last["error"]["data"]["reason"] == "CREDENTIALS_REVOKED"
    assert f"API token {token_id} was revoked" in last["error"]["message"]
    assert first.gateway.open_tokens._held == {}  # its hold went with the listen
    again = await carol.post("/mcp", json=request, headers=MCP_HEADERS)
    assert again.status_code == 401
