"""Runtime credentials at the gateway (T2, T4): who may manage them, the exchange at
`POST /api/v1/identity`, and the scope the services enforce on the identity it gives."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import jwt
import pytest
import structlog.testing

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.credentials import CredentialIdentity
from agentworks.core.errors import NotFound, PermissionDenied
from agentworks.core.identity import verify

TOOL = "/api/v1/tools/runtime_credentials"
EXCHANGE = "/api/v1/identity"


async def _register(api, operator_token, target: str, owner: str) -> None:
    response = await api(operator_token).post(
        "/api/v1/tools/targets", json={"action": "register", "target": target, "owner": owner}
    )
    assert response.status_code == 200, response.text


@pytest.fixture
async def crews(api, operator_token) -> None:
    """crew:a owned by user:alice, crew:b owned by user:bob."""
    await _register(api, operator_token, "crew:a", "user:alice")
    await _register(api, operator_token, "crew:b", "user:bob")


async def _create(api, token: str, principal: str, **extra) -> dict:
    response = await api(token).post(
        TOOL, json={"action": "create", "principal": principal, **extra}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_the_owner_of_crew_a_may_create_a_credential_for_it_but_not_for_crew_b_T2(
    api, crews, alice_token, make_token
):
    """T2: a target's owner creates credentials for its own targets only, shown once;
    lists and revokes only those; someone else's id is NOT_FOUND."""
    created = await _create(api, alice_token, "agent:a/bot", label="alice's runtime")
    secret = created["credential"]
    assert secret.startswith("awr_") and len(secret) == 4 + 43
    assert created["principal"] == "agent:a/bot" and created["targets"] == ["crew:a"]
    assert created["credential_id"].startswith("cred_") and created["created_by"] == "user:alice"

    refused = await api(alice_token).post(
        TOOL, json={"action": "create", "principal": "agent:b/bot"}
    )
    assert refused.status_code == 403
    assert "only the owner of crew:b (user:bob)" in refused.json()["error"]["message"]
    other_crew = await api(alice_token).post(
        TOOL, json={"action": "create", "principal": "agent:a/bot", "targets": ["crew:b"]}
    )
    assert other_crew.status_code == 400
    assert "may serve only crew:a" in other_crew.json()["error"]["message"]

    bob_token = await make_token("user:bob")
    listed = (await api(alice_token).post(TOOL, json={"action": "list"})).json()
    assert [c["credential_id"] for c in listed["runtime_credentials"]] == [created["credential_id"]]
    assert secret not in str(listed)
    assert (await api(bob_token).post(TOOL, json={"action": "list"})).json() == {
        "runtime_credentials": []
    }
    revoke = {"action": "revoke", "credential_id": created["credential_id"]}
    assert (await api(bob_token).post(TOOL, json=revoke)).status_code == 404
    revoked = await api(alice_token).post(TOOL, json=revoke)
    assert revoked.status_code == 200 and revoked.json()["revoked_by"] == "user:alice"


async def test_the_exchange_refuses_unknown_revoked_and_expired_credentials_on_both_T2_T4_P6(
    gateways, api, crews, operator_token, signing_keys
):
    """T2 T4: an exchange gives a gateway-signed identity of the credential's principal
    with its targets and no role; an unknown, a revoked (at once, on both replicas) and
    an expired credential get 401 saying which."""
    first, second = (api(operator_token, base_url=g.url) for g in gateways)
    created = await _create(api, operator_token, "agent:a/bot")
    runtime = [api(created["credential"], base_url=g.url) for g in gateways]
    for client in runtime:
        response = await client.post(EXCHANGE)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["principal"] == "agent:a/bot" and body["targets"] == ["crew:a"]
        identity = verify(body["identity"], signing_keys.trusted())
        assert identity.targets == frozenset({"crew:a"}) and not identity.roles
        assert datetime.fromisoformat(body["expires_at"]).timestamp() > time.time()

    unknown = await api("awr_" + "x" * 43, base_url=gateways[0].url).post(EXCHANGE)
    assert unknown.status_code == 401
    assert "unknown runtime credential" in unknown.json()["error"]["message"]
    assert unknown.json()["error"]["reason"] == "CREDENTIALS_INVALID"  # P6: for programs

    revoke = {"action": "revoke", "credential_id": created["credential_id"]}
    assert (await second.post(TOOL, json=revoke)).status_code == 200
    for client in runtime:
        response = await client.post(EXCHANGE)
        assert response.status_code == 401
        message = response.json()["error"]["message"]
        assert f"runtime credential {created['credential_id']} was revoked" in message
        assert response.json()["error"]["reason"] == "CREDENTIALS_REVOKED"

    short = await _create(api, operator_token, "agent:a/bot", expires_in_seconds=1)
    expires = datetime.fromisoformat(short["expires_at"]).timestamp()
    await asyncio.sleep(max(0.0, expires - time.time()) + 0.1)  # its expiry must pass
    for gateway in gateways:
        response = await api(short["credential"], base_url=gateway.url).post(EXCHANGE)
        assert response.status_code == 401
        assert (
            f"runtime credential {short['credential_id']} expired at"
            in (response.json()["error"]["message"])
        )
        assert response.json()["error"]["reason"] == "CREDENTIALS_EXPIRED"
    assert (await first.post(TOOL, json={"action": "list"})).status_code == 200


async def test_a_runtime_credential_is_no_api_token_and_an_api_token_no_credential_T2(
    gateway, api, crews, operator_token, alice_token
):
    """T2: used as an API token a credential gets 401 pointing at the exchange; an API
    token at the exchange gets 401 too."""
    created = await _create(api, operator_token, "agent:a/bot")
    response = await api(created["credential"]).post(
        "/api/v1/tools/messages", json={"action": "read", "inbox_id": "x"}
    )
    assert response.status_code == 401
    assert (
        "this is a runtime credential: exchange it at POST /api/v1/identity"
        in (response.json()["error"]["message"])
    )
    token_at_exchange = await api(alice_token).post(EXCHANGE)
    assert token_at_exchange.status_code == 401
    assert (
        "is an API token, not a runtime credential"
        in (token_at_exchange.json()["error"]["message"])
    )


async def test_an_api_token_with_an_expiry_stops_at_it_T4(gateway, api, operator_token):
    """T4: `tokens create expires_in_seconds` gives a token that works until its expiry,
    then gets 401 saying when it expired."""
    created = await api(operator_token).post(
        "/api/v1/tools/tokens",
        json={"action": "create", "principal": "user:carol", "expires_in_seconds": 1},
    )
    assert created.status_code == 200, created.text
    token, expires_at = created.json()["token"], created.json()["expires_at"]
    read = {"action": "read", "inbox_id": "nope"}
    assert (await api(token).post("/api/v1/tools/messages", json=read)).status_code == 404
    expires = datetime.fromisoformat(expires_at).timestamp()
    await asyncio.sleep(max(0.0, expires - time.time()) + 0.1)  # its expiry must pass
    refused = await api(token).post("/api/v1/tools/messages", json=read)
    assert refused.status_code == 401
    assert (
        f"API token {created.json()['token_id']} expired at" in (refused.json()["error"]["message"])
    )


async def test_a_credentials_identity_lives_the_runtime_identity_ttl_T4(
    start_gateway, api, crews, operator_token
):
    """T4: the exchanged identity lives GATEWAY_RUNTIME_IDENTITY_TTL_SECONDS (default 60)."""
    created = await _create(api, operator_token, "agent:a/bot")
    short = await start_gateway(GATEWAY_RUNTIME_IDENTITY_TTL_SECONDS="15")
    for url, ttl in ((None, 60), (short.url, 15)):
        response = await api(created["credential"], base_url=url).post(EXCHANGE)
        claims = jwt.decode(response.json()["identity"], options={"verify_signature": False})
        assert claims["exp"] - claims["iat"] == ttl


async def test_a_credential_for_crew_a_cannot_claim_send_or_read_for_crew_b_T2(
    gateway, api, crews, operator_token, alice_token, messaging, functions, identity
):
    """T2 over real gRPC: the identity a crew:a credential is exchanged for claims crew:a's
    turns and executions but not crew:b's, cannot reply into crew:b's conversation, and
    reads no inbox, not even one of its own principal."""
    created = await _create(api, operator_token, "agent:a/bot")
    runtime = CredentialIdentity(gateway.url, created["credential"])
    await runtime.prepare()
    sent = await api(alice_token).post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "b", "message": "hi b"}
    )
    assert sent.status_code == 200, sent.text
    async with MessagingClient(messaging.address, identity=identity("agent:b/bot")) as b_bot:
        turn = await b_bot.claim_turn(["crew:b"], wait_seconds=10)
        assert turn is not None

    async with (
        MessagingClient(messaging.address, identity=runtime) as bot,
        FunctionsClient(functions.address, identity=runtime) as executions,
    ):
        assert await bot.claim_turn(["crew:a"]) is None
        with pytest.raises(PermissionDenied, match="may not act for crew:b"):
            await bot.claim_turn(["crew:b"])
        assert await executions.claim_execution(["crew:a"]) is None
        with pytest.raises(PermissionDenied, match="may not run executions of crew:b"):
            await executions.claim_execution(["crew:b"])
        with pytest.raises(NotFound):
            await bot.send_message(turn.reply_inbox_id, "I am crew a")
        for inbox_id in (sent.json()["inbox_id"], "nope"):
            with pytest.raises(PermissionDenied, match="a runtime reads no inbox"):
                await bot.read(inbox_id)


async def test_routine_exchanges_log_at_debug_and_first_use_and_refusals_at_info_V8(
    api, crews, operator_token
):
    """V8: a credential's first exchange is one info line; the routine ones after it (a
    runtime renews its identity every minute or so) are debug; a refusal stays info."""
    created = await _create(api, operator_token, "agent:a/bot")
    client = api(created["credential"])
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert (await client.post(EXCHANGE)).status_code == 200
        assert (await api("awr_" + "x" * 43).post(EXCHANGE)).status_code == 401
    info = [e for e in logs if e["log_level"] in ("info", "warning", "error")]
    assert [e["event"] for e in info] == ["runtime_credential.exchanged", "api.refused"]
    assert info[0]["first_use"] is True
    assert [e["event"] for e in logs if e["log_level"] == "debug"] == [
        "runtime_credential.exchanged"
    ] * 2
