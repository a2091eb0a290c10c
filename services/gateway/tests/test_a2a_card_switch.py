"""The owner's A2A card switch (X1, X5, C1), driven by a2a-sdk's own card resolver and
client: a card turned off answers 404 exactly as an unknown target's does, leaves the
listing, and refuses JSON-RPC as for an unknown agent; turned on, it is served again.
Only the owner (or the operator) changes it, and it touches no other surface.
"""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError, AgentCardResolutionError

from tests.fixtures.a2a_messages import send_once, text_message


def _card_url(gateway, target: str) -> str:
    return f"{gateway.url}/a2a/{target}/.well-known/agent-card.json"


async def _switch(client: httpx.AsyncClient, on: bool) -> httpx.Response:
    return await client.post(
        "/api/v1/tools/targets",
        json={"action": "update", "target": "crew:demo", "a2a_card": on},
    )


async def _listed(client: httpx.AsyncClient) -> list[str]:
    response = await client.get("/a2a/agents")
    assert response.status_code == 200, response.text
    return [agent["name"] for agent in response.json()["agents"]]


async def _rpc(client: httpx.AsyncClient, target: str) -> httpx.Response:
    """A JSON-RPC SendMessage posted as it is, to compare refusals byte for byte."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m-raw", "parts": []}},
    }
    return await client.post(f"/a2a/{target}", json=body, headers={"A2A-Version": "1.0"})


async def test_the_owner_turns_the_a2a_card_off_and_on_X1_X5_C1(
    gateway, api, alice_token, make_token, demo, echo
):
    """X1 X5 C1: with a2a_card off, a2a-sdk's card resolver gets 404 with the very body an
    unknown target gets (no existence leak), /a2a/agents leaves the target out, and a
    client resolved before is refused with the 404 an unknown agent gets; other surfaces
    still show it; a non-owner cannot change the switch; turned on, all is served again."""
    owner = api(await make_token("user:owner"))
    alice = api(alice_token)
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {alice_token}"}, timeout=30)
    card = await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
    client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
    try:
        assert card.name == "crew:demo"
        assert await _listed(alice) == ["crew:demo"]

        refused = await _switch(alice, False)  # alice may call echo but does not own it
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["reason"] == "NOT_OWNER"
        turned = await _switch(owner, False)
        assert turned.status_code == 200, turned.text
        assert turned.json()["capabilities"] == {"free_text_ask": True, "a2a_card": False}

        with pytest.raises(AgentCardResolutionError) as hidden:
            await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
        assert hidden.value.status_code == 404
        off = await alice.get(_card_url(gateway, "crew/demo"))
        unknown = await alice.get(_card_url(gateway, "crew/nope"))
        assert (off.status_code, unknown.status_code) == (404, 404)
        assert off.json() == _renamed(unknown.json(), "crew:nope", "crew:demo")
        # The owner's own card is off too: the switch is the target's, not per caller.
        assert (await owner.get(_card_url(gateway, "crew/demo"))).status_code == 404
        assert await _listed(alice) == []

        with pytest.raises(A2AClientError, match="HTTP Error 404"):
            await send_once(client, text_message("m-1", "hello?"))
        off, unknown = await _rpc(alice, "crew/demo"), await _rpc(alice, "crew/nope")
        assert (off.status_code, unknown.status_code) == (404, 404)
        assert off.json() == _renamed(unknown.json(), "crew:nope", "crew:demo")

        # Not an A2A agent, still a target: the owner's other surfaces are unchanged.
        got = await owner.post("/api/v1/tools/targets", json={"action": "get", "target": demo})
        assert got.json()["owner"] == "user:owner"
        listed = await alice.post("/api/v1/tools/list", json={"what": "targets"})
        assert [t["target"] for t in listed.json()["items"]] == ["crew:demo"]

        assert (await _switch(owner, True)).json()["capabilities"]["a2a_card"] is True
        again = await A2ACardResolver(http, f"{gateway.url}/a2a/crew/demo").get_agent_card()
        assert [s.id for s in again.skills] == ["echo", "agentworks:conversation"]
        assert await _listed(alice) == ["crew:demo"]
        sent = await send_once(client, text_message("m-2", "hello again"), immediately=True)
        assert sent.task.context_id
    finally:
        await client.close()
        await http.aclose()


async def test_registering_sets_the_a2a_card_and_keeps_it_unless_given_X1_C1(
    gateway, api, operator_token, alice_token
):
    """X1 C1: `targets register` takes a2a_card; registering again without it keeps the
    owner's setting; `update` needs one capability and takes either alone."""
    ops = api(operator_token)
    registered = await ops.post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:quiet", "owner": "user:o", "a2a_card": False},
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["capabilities"] == {"free_text_ask": True, "a2a_card": False}
    again = await ops.post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:quiet", "owner": "user:o"},
    )
    assert again.json()["capabilities"]["a2a_card"] is False
    alice = api(alice_token)
    assert (await alice.get(_card_url(gateway, "crew/quiet"))).status_code == 404

    nothing = await ops.post(
        "/api/v1/tools/targets", json={"action": "update", "target": "crew:quiet"}
    )
    assert nothing.status_code == 400
    assert nothing.json()["error"]["metadata"]["field"] == "free_text_ask, a2a_card"
    messaging_off = await ops.post(
        "/api/v1/tools/targets",
        json={"action": "update", "target": "crew:quiet", "free_text_ask": False},
    )
    assert messaging_off.json()["capabilities"] == {"free_text_ask": False, "a2a_card": False}


def _renamed(body: object, old: str, new: str) -> object:
    """`body` with every `old` in its strings read as `new` (the refusal names the target)."""
    if isinstance(body, dict):
        return {k: _renamed(v, old, new) for k, v in body.items()}
    if isinstance(body, list):
        return [_renamed(v, old, new) for v in body]
    return body.replace(old, new) if isinstance(body, str) else body
