"""The HTTP side of the gateway: bearer tokens, `/api/v1/tools/<tool>`, `/healthz`."""

from __future__ import annotations

import contextlib

import pytest
from mcp.shared.exceptions import MCPError

from agentworks.client.messaging import parts_json

SEND = "/api/v1/tools/messages"


async def test_health_endpoint_answers_ok_G4(gateway, api):
    """G4: the gateway serves a health endpoint (no token needed)."""
    response = await api(None).get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.reliability(
    scenario="Bearer tokens at the gateway (A1, G1)",
    action="requests to /api/v1 and /mcp with no Authorization header, a malformed one "
    "(Basic) and an unknown token",
    check="HTTP 401 UNAUTHENTICATED with WWW-Authenticate: Bearer and a message saying what "
    "was wrong and how to get a token",
)
@pytest.mark.parametrize("path", ["/api/v1/tools/messages", "/mcp"])
async def test_a_missing_or_unknown_token_is_refused_with_401_and_a_clear_message_A1(
    gateway, api, path
):
    """A1 G1: no token, a malformed header and an unknown token each get 401 and say why."""
    body = {"action": "read", "inbox_id": "x"}
    missing = await api(None).post(path, json=body)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    error = missing.json()["error"]
    assert error["code"] == "UNAUTHENTICATED"
    assert "Authorization: Bearer <token>" in error["message"]

    malformed = await api(None).post(path, json=body, headers={"Authorization": "Basic abc"})
    assert malformed.status_code == 401
    assert "malformed Authorization header" in malformed.json()["error"]["message"]

    unknown = await api("aw_" + "x" * 43).post(path, json=body)
    assert unknown.status_code == 401
    assert "unknown API token" in unknown.json()["error"]["message"]


async def test_the_tool_list_is_served_to_token_holders_as_mcp_lists_it_G1_G2(
    gateway, api, alice_token, mcp_session
):
    """G1 G2: `GET /api/v1/tools` (what `agentworks mcp stdio` serves) needs a bearer token
    and lists the MCP tools with the names, descriptions and schemas `/mcp` gives."""
    missing = await api(None).get("/api/v1/tools")
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "UNAUTHENTICATED"

    response = await api(alice_token).get("/api/v1/tools")
    assert response.status_code == 200
    listed = response.json()["tools"]
    async with mcp_session(gateway.mcp_url, alice_token) as session:
        over_mcp = (await session.list_tools()).tools
    assert [t["name"] for t in listed] == [t.name for t in over_mcp]
    assert [(t["description"], t["inputSchema"]) for t in listed] == [
        (t.description, t.input_schema) for t in over_mcp
    ]


@pytest.mark.reliability(
    scenario="Revoked API token, two gateway replicas (A1, G1)",
    action="an operator creates a token on replica 1; it works on both replicas over "
    "/api/v1 and over MCP (official client sessions, one per replica, opened before); the "
    "operator revokes it on replica 2",
    check="the very next request with it on either replica is refused: /api/v1 and /mcp "
    "with 401 UNAUTHENTICATED naming the revoked token, and the already-open MCP sessions' "
    "next tool call fails (the SDK reports the 401 as an error response); tokens are not "
    "cached",
)
async def test_a_revoked_token_is_refused_on_the_next_request_on_every_replica_A1(
    gateways, api, operator_token, mcp_session
):
    """A1 G1: revocation is immediate (tokens are not cached), on both replicas, over
    /api/v1 and for MCP sessions that were opened while the token was valid."""
    first, second = (api(operator_token, base_url=g.url) for g in gateways)
    created = await first.post(
        "/api/v1/tools/tokens",
        json={"action": "create", "principal": "user:carol", "label": "carol's laptop"},
    )
    assert created.status_code == 200, created.text
    token, token_id = created.json()["token"], created.json()["token_id"]
    assert token.startswith("aw_")
    read = {"action": "read", "inbox_id": "nope"}

    carol = [api(token, base_url=g.url) for g in gateways]
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(mcp_session(g.mcp_url, token)) for g in gateways
        ]
        for client, session in zip(carol, sessions, strict=True):  # works on both replicas
            response = await client.post(SEND, json=read)
            assert response.status_code == 404
            result = await session.call_tool("messages", read)
            assert result.is_error and result.structured_content["error"]["code"] == "NOT_FOUND"

        revoked = await second.post(
            "/api/v1/tools/tokens", json={"action": "revoke", "token_id": token_id}
        )
        assert revoked.status_code == 200
        assert revoked.json()["revoked_at"] and revoked.json()["revoked_by"] == "user:ops"

        for client, session in zip(carol, sessions, strict=True):
            for path in (SEND, "/mcp"):
                response = await client.post(path, json=read)
                assert response.status_code == 401
                message = response.json()["error"]["message"]
                assert f"API token {token_id} was revoked" in message
            # The SDK reports the 401 as "Server returned an error response" (the
            # gateway's text is in the HTTP answer checked above).
            with pytest.raises(MCPError, match="error response"):
                await session.call_tool("messages", read)


async def test_tokens_are_listed_without_secrets_and_only_operators_manage_them_A1(
    gateway, api, operator_token, alice_token
):
    """A1: list shows ids, principals and roles, never a secret or hash; non-operators get 403."""
    listing = await api(operator_token).post("/api/v1/tools/tokens", json={"action": "list"})
    assert listing.status_code == 200
    tokens = listing.json()["tokens"]
    assert {t["principal"] for t in tokens} == {"user:ops", "user:alice"}
    assert all(set(t) >= {"token_id", "roles", "label", "created_at"} for t in tokens)
    assert operator_token not in listing.text and "hash" not in listing.text

    for body in (
        {"action": "list"},
        {"action": "create", "principal": "user:mallory", "roles": ["operator"]},
    ):
        refused = await api(alice_token).post("/api/v1/tools/tokens", json=body)
        assert refused.status_code == 403
        assert refused.json()["error"] == {
            "code": "PERMISSION_DENIED",
            "message": "only operators may "
            + ("list" if body["action"] == "list" else "create")
            + " tokens: user:alice has no operator role; ask an operator, or use a token "
            "created with --operator",
            "reason": "ROLE_REQUIRED",
            "metadata": {"role": "operator"},
        }


async def test_no_token_can_be_created_for_a_service_principal_A1_T1(gateway, api, operator_token):
    """A1 T1: the gateway vouches for external callers only; a token for service:<name>
    is refused at creation (every service would refuse the identity it signed)."""
    body = {"action": "create", "principal": "service:functions"}
    refused = await api(operator_token).post("/api/v1/tools/tokens", json=body)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": "INVALID_ARGUMENT",
        "message": "principal service:functions: tokens are for user:<name>, "
        "agent:<crew>/<agent> or workflow:<id>; services sign their own identities",
        "reason": "INVALID_VALUE",
        "metadata": {"field": "principal"},
    }
    listing = await api(operator_token).post("/api/v1/tools/tokens", json={"action": "list"})
    assert "service:functions" not in listing.text


async def test_api_errors_carry_the_status_name_and_the_matching_http_status_A1_C7(
    gateway, api, alice_token
):
    """C7: service errors keep their text; the HTTP status matches the gRPC status."""
    client = api(alice_token)
    not_found = await client.post(SEND, json={"action": "read", "inbox_id": "in_missing"})
    assert not_found.status_code == 404
    assert not_found.json()["error"]["code"] == "NOT_FOUND"
    assert "in_missing" in not_found.json()["error"]["message"]

    invalid = await client.post(SEND, json={"action": "read", "inbox_id": "x", "wait_seconds": 26})
    assert invalid.status_code == 400
    assert invalid.json()["error"] == {
        "code": "INVALID_ARGUMENT",
        "message": "invalid arguments for messages: wait_seconds: 26 is greater than the "
        "maximum of 25",
        "reason": "FIELD_RULE",
        "metadata": {"field": "wait_seconds", "tool": "messages"},
    }

    not_json = await client.post(SEND, content=b"{not json")
    assert not_json.status_code == 400
    assert "request body is not JSON" in not_json.json()["error"]["message"]

    unknown = await client.post("/api/v1/tools/nope", json={})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"].startswith("unknown tool 'nope': the tools are")


async def test_send_and_read_over_the_api_return_the_receipt_and_the_page_C2_C7(
    gateway, api, alice_token, demo, bot
):
    """C2 C7: send returns {accepted, message_id, conversation_id, inbox_id}; read pages."""
    client = api(alice_token)
    sent = await client.post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
    assert sent.status_code == 200, sent.text
    receipt = sent.json()
    assert set(receipt) == {"accepted", "message_id", "conversation_id", "inbox_id"}
    assert receipt["accepted"] is True

    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None and turn.reply_inbox_id == receipt["inbox_id"]
    await bot.send_message(turn.reply_inbox_id, "hello back")
    await bot.complete_turn(turn.turn_id)

    page = await client.post(SEND, json={"action": "read", "inbox_id": receipt["inbox_id"]})
    assert page.status_code == 200

    structured = await client.post(
        SEND,
        json={
            "action": "send",
            "inbox_id": receipt["inbox_id"],
            "message": "details",
            "parts": [{"text": "see"}, {"data": {"ticket": 2**60 + 1, "tags": ["a"], "n": 2}}],
        },
    )
    assert structured.status_code == 200, structured.text
    assert structured.json()["conversation_id"] == receipt["conversation_id"]
    # JSON keeps its numbers on the way: past 2^53 exact, an integer stays an integer.
    second = await bot.claim_turn([demo], wait_seconds=5)
    assert second is not None
    [delivery] = second.deliveries
    data = parts_json(delivery.message.parts)
    assert data == [{"text": "see"}, {"data": {"ticket": 2**60 + 1, "tags": ["a"], "n": 2}}]
    assert type(data[1]["data"]["n"]) is int
    await bot.complete_turn(second.turn_id)
    empty = await client.post(SEND, json={"action": "send", "crew": "demo", "message": ""})
    assert empty.status_code == 400
    assert empty.json()["error"]["message"].startswith("text is empty")
    (message,) = page.json()["messages"]
    assert message["text"] == "hello back" and message["sender"] == "agent:demo/bot"
    assert message["direction"] == "to_inbox" and message["created_at"]
    assert page.json()["next_cursor"]
    # JSON has no integer type: 1.0 is the whole number 1; 1.5 is not.
    whole = {"action": "read", "inbox_id": receipt["inbox_id"], "limit": 1.0, "wait_seconds": 0.0}
    again = await client.post(SEND, json=whole)
    assert again.status_code == 200, again.text
    assert [m["text"] for m in again.json()["messages"]] == ["hello back"]
    half = await client.post(SEND, json={**whole, "limit": 1.5})
    assert half.status_code == 400 and "limit" in half.json()["error"]["message"]


async def test_send_refuses_ambiguous_or_missing_destinations_and_other_fields_C2(
    gateway, api, alice_token
):
    """C2: exactly one of crew, workflow, inbox_id (several cannot be sent, so the gateway
    refuses them; none is messaging's refusal, in its words); read-only fields are refused
    on send."""
    client = api(alice_token)
    both = await client.post(
        SEND, json={"action": "send", "crew": "a", "inbox_id": "b", "message": "x"}
    )
    assert both.status_code == 400
    assert (
        "messages send takes one of crew, workflow or inbox_id (got crew, inbox_id)"
        in (both.json()["error"]["message"])
    )
    none = await client.post(SEND, json={"action": "send", "message": "x"})
    assert none.status_code == 400
    assert none.json()["error"]["message"] == (
        "destination is missing: give a target (crew or workflow) to start a new "
        "conversation, or an inbox_id to continue one"
    )
    extra = await client.post(
        SEND, json={"action": "send", "crew": "a", "message": "x", "wait_seconds": 3}
    )
    assert extra.status_code == 400
    assert "messages action 'send' does not take wait_seconds" in extra.json()["error"]["message"]


async def test_targets_are_registered_updated_and_read_through_the_api_C1_C8(
    gateway, api, operator_token, alice_token
):
    """C1 C8: register with owner (free_text_ask on by default), update, get; owner rules."""
    ops = api(operator_token)
    registered = await ops.post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "workflow:wf-1", "owner": "user:alice"},
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["capabilities"] == {"free_text_ask": True, "a2a_card": True}
    assert registered.json()["owner"] == "user:alice"

    updated = await api(alice_token).post(
        "/api/v1/tools/targets",
        json={"action": "update", "target": "workflow:wf-1", "free_text_ask": False},
    )
    assert updated.status_code == 200
    assert updated.json()["capabilities"] == {"free_text_ask": False, "a2a_card": True}

    refused = await api(alice_token).post(
        SEND, json={"action": "send", "workflow": "wf-1", "message": "hi"}
    )
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "FAILED_PRECONDITION"

    by_alice = await api(alice_token).post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:x", "owner": "user:alice"},
    )
    assert by_alice.status_code == 403

    bad = await ops.post("/api/v1/tools/targets", json={"action": "get", "target": "demo"})
    assert bad.status_code == 400
    assert "expected crew:<name> or workflow:<id>" in bad.json()["error"]["message"]


async def test_mcp_refuses_foreign_hosts_and_origins_dns_rebinding_G1(gateway, api, alice_token):
    """G1: /mcp answers only the configured Host and Origin values (GATEWAY_ALLOWED_*)."""
    client = api(alice_token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream"}
    foreign_host = await client.post(
        "/mcp", json=body, headers={**headers, "Host": "evil.example:8080"}
    )
    assert foreign_host.status_code == 421
    foreign_origin = await client.post(
        "/mcp", json=body, headers={**headers, "Origin": "http://evil.example"}
    )
    assert foreign_origin.status_code == 403
