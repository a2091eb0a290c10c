"""Outbound HTTP connects only to the address the policy checked (X4, N2): no second DNS
look-up, so a host whose DNS answers differently to the check and to the connection (DNS
rebinding) cannot point the gateway at an address the policy refuses."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface
from google.protobuf.json_format import MessageToDict

from agentworks_gateway.a2a_out import peer
from agentworks_gateway.a2a_out.settings import AllowedAgent
from agentworks_gateway.webhooks_out import policy as policy_module
from agentworks_gateway.webhooks_out.pinned import PinnedTransport
from agentworks_gateway.webhooks_out.policy import AddressPolicy, AddressRefused

NAME = "agent.invalid"  # .invalid never resolves (RFC 2606): only a pinned client gets there
LOOPBACK = AddressPolicy(allow=(ipaddress.ip_network("127.0.0.1/32"),))


@pytest.fixture
async def server() -> AsyncIterator[dict[str, Any]]:
    """A local HTTP server answering every request with `answer` and recording its Host."""
    seen: list[str] = []
    state: dict[str, Any] = {"answer": b"{}", "seen": seen}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        host = next(line for line in head.split("\r\n") if line.lower().startswith("host:"))
        seen.append(host.partition(":")[2].strip())
        body = state["answer"]
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    state["port"] = listening.sockets[0].getsockname()[1]
    yield state
    listening.close()
    await listening.wait_closed()


def resolving(monkeypatch, address: str) -> list[str]:
    """The policy's look-up answers `address` for NAME (what a hostile DNS would say)."""
    asked: list[str] = []
    real = policy_module.resolve

    async def fake(url: str, host: str, port: int):
        asked.append(host)
        if host == NAME:
            return [ipaddress.ip_address(address)]
        return await real(url, host, port)

    monkeypatch.setattr(policy_module, "resolve", fake)
    return asked


async def test_a_request_goes_to_the_address_that_was_checked_X4_N2(server, monkeypatch):
    """X4 N2: the checked address is the one connected to, with the name as Host; a plain
    client (a second look-up) cannot even find the host."""
    asked = resolving(monkeypatch, "127.0.0.1")
    url = f"http://{NAME}:{server['port']}/card"
    async with httpx.AsyncClient() as plain:
        with pytest.raises(httpx.ConnectError):
            await plain.get(url)
    async with httpx.AsyncClient(transport=PinnedTransport(LOOPBACK)) as pinned:
        answer = await pinned.get(url)
    assert answer.status_code == 200
    assert server["seen"] == [f"{NAME}:{server['port']}"]
    assert asked == [NAME]


async def test_a_name_that_now_resolves_to_a_private_address_is_refused_unsent_X4_N2(
    server, monkeypatch
):
    """X4 N2: the attacker's DNS turns to a private address after the agent was listed:
    the request is refused at the check, and nothing reaches any server."""
    resolving(monkeypatch, "10.1.2.3")
    async with httpx.AsyncClient(transport=PinnedTransport(LOOPBACK)) as pinned:
        with pytest.raises(AddressRefused, match=r"10\.1\.2\.3, a private address"):
            await pinned.get(f"http://{NAME}:{server['port']}/card")
    assert server["seen"] == []


async def test_the_outbound_a2a_client_is_pinned_X4(server, monkeypatch):
    """X4: the A2A client's every request (the card, then its interface) goes through the
    pinned transport: the card of an agent listed by a name that only the check resolves
    is fetched from the checked address."""
    resolving(monkeypatch, "127.0.0.1")
    base = f"http://{NAME}:{server['port']}"
    card = AgentCard(
        name="peer",
        description="an external agent",
        version="1.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=base + "/a2a")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    server["answer"] = json.dumps(MessageToDict(card)).encode()
    agent = AllowedAgent("peer", base + "/.well-known/agent-card.json")
    async with peer.connect(agent, LOOPBACK, 5) as remote:
        assert remote is not None
    assert server["seen"] == [f"{NAME}:{server['port']}"]
