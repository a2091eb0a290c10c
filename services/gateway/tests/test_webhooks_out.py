"""Webhooks out (N2): registering endpoints through the `endpoints` tool, the address
policy as an attacker would probe it, bad input, another tenant (A3), and one signed
attempt as the sender makes it (signature, no redirects, the send-time check, bounds)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from standardwebhooks import Webhook

from agentworks_gateway.webhooks_out.policy import AddressPolicy
from agentworks_gateway.webhooks_out.sending import Sender, event_body, new_secret
from agentworks_gateway.webhooks_out.settings import parse_networks
from tests.fixtures.webhook_receiver import Receiver

LOOPBACK = {"GATEWAY_WEBHOOKS_ALLOW": "127.0.0.1/32"}


@pytest.fixture
async def receiver():
    hook = await Receiver().start()
    yield hook
    await hook.stop()


async def _tool(client, **args):
    response = await client.post("/api/v1/tools/endpoints", json=args)
    return response.status_code, response.json()


async def test_register_list_get_rotate_delete_an_endpoint_N2(
    start_gateway, api, alice_token, receiver
):
    """N2: register gives the endpoint id and a Standard Webhooks secret (once); list and
    get never show it; rotate gives a new one; delete removes the endpoint."""
    gateway = await start_gateway(**LOOPBACK)
    alice = api(alice_token, base_url=gateway.url)
    status, made = await _tool(
        alice, action="register", url=receiver.url, events=["call_ends"], description="ci"
    )
    assert status == 200, made
    assert made["secret"].startswith("whsec_") and made["endpoint_id"].startswith("ep_")
    assert made["events"] == ["call_ends"] and made["principal"] == "user:alice"
    Webhook(made["secret"])  # the package reads it as a secret

    status, listed = await _tool(alice, action="list")
    assert status == 200 and [e["endpoint_id"] for e in listed["endpoints"]] == [
        made["endpoint_id"]
    ]
    assert "secret" not in listed["endpoints"][0] and listed["next_cursor"] == ""
    status, got = await _tool(alice, action="get", endpoint_id=made["endpoint_id"])
    assert status == 200 and got["url"] == receiver.url and "secret" not in got

    status, rotated = await _tool(alice, action="rotate", endpoint_id=made["endpoint_id"])
    assert status == 200 and rotated["secret"].startswith("whsec_")
    assert rotated["secret"] != made["secret"] and rotated["secret_rotated_at"]

    status, deleted = await _tool(alice, action="delete", endpoint_id=made["endpoint_id"])
    assert (status, deleted["deleted"]) == (200, True)
    status, gone = await _tool(alice, action="get", endpoint_id=made["endpoint_id"])
    assert status == 404 and gone["error"]["reason"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("url", "category"),
    [
        ("http://127.0.0.1:{port}/hook", "loopback"),
        ("https://127.0.0.1:{port}/hook", "loopback"),
        ("http://localhost:{port}/hook", "loopback"),  # a name that resolves to loopback
        ("http://169.254.169.254/latest/meta-data/", "link-local"),  # cloud metadata
        ("https://10.1.2.3/hook", "private"),
        ("https://192.168.0.10/hook", "private"),
        ("https://[::1]/hook", "loopback"),
        ("https://[::ffff:127.0.0.1]/hook", "loopback"),
        ("https://[fd00::1]/hook", "private"),
        ("https://[fe80::1]/hook", "link-local"),
        ("https://0.0.0.0/hook", "unspecified"),
        ("https://224.0.0.1/hook", "multicast"),
        ("https://100.64.0.1/hook", "not global (reserved or shared)"),
    ],
)
async def test_an_attacker_cannot_register_an_internal_address_N2(
    gateway, api, alice_token, receiver, url, category
):
    """N2: without the operator's allow-list every loopback, private, link-local,
    multicast, unspecified or shared address is refused at registration, a host name
    that resolves to one too; the refusal names the address and the setting, and
    nothing is stored."""
    alice = api(alice_token)
    status, body = await _tool(
        alice, action="register", url=url.format(port=receiver.port), events=["call_ends"]
    )
    assert status == 400, body
    error = body["error"]
    assert error["reason"] == "INVALID_VALUE"
    assert error["metadata"]["rule"] == "address_policy"
    assert error["metadata"]["category"] == category
    assert error["metadata"]["setting"] == "GATEWAY_WEBHOOKS_ALLOW"
    assert (await _tool(alice, action="list"))[1]["endpoints"] == []
    assert receiver.requests == []


async def test_bad_input_is_refused_with_a_reason_and_nothing_stored_N2_B1(
    start_gateway, api, alice_token, make_token, demo, receiver
):
    """N2 B1: a bad URL, scheme, credentials in the URL, plain http outside the
    allow-list, bad or no event sources, an inbox the caller may not read, arguments of
    another action, and past the cap on endpoints: refused with a reason, nothing stored."""
    gateway = await start_gateway(
        GATEWAY_WEBHOOKS_ALLOW="127.0.0.1/32", GATEWAY_WEBHOOKS_MAX_ENDPOINTS="2"
    )
    alice = api(alice_token, base_url=gateway.url)
    bob = api(await make_token("user:bob"), base_url=gateway.url)
    sent = await bob.post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hi"}
    )
    bobs_inbox = sent.json()["inbox_id"]
    cases = [
        ({"url": "ftp://127.0.0.1/x", "events": ["call_ends"]}, "FIELD_RULE", "url"),
        ({"url": "https://", "events": ["call_ends"]}, "FIELD_RULE", "url"),
        ({"url": "not a url", "events": ["call_ends"]}, "FIELD_RULE", "url"),
        ({"url": "https://u:p@127.0.0.1/x", "events": ["call_ends"]}, "FIELD_RULE", "url"),
        ({"url": "http://192.0.2.1/x", "events": ["call_ends"]}, "INVALID_VALUE", "url"),
        ({"url": receiver.url, "events": ["everything"]}, "INVALID_VALUE", "events"),
        ({"url": receiver.url, "events": ["inbox:"]}, "INVALID_VALUE", "events"),
        ({"url": receiver.url, "events": []}, None, "events"),
        ({"url": receiver.url, "events": ["call_ends"], "status": "failing"}, "FIELD_RULE", None),
        ({"url": receiver.url}, "FIELD_RULE", "events"),
    ]
    for args, reason, field in cases:
        status, body = await _tool(alice, action="register", **args)
        assert status == 400, (args, body)
        if reason:
            assert body["error"]["reason"] == reason, (args, body)
        if field:
            assert field in body["error"]["message"], (args, body)

    status, body = await _tool(
        alice, action="register", url=receiver.url, events=[f"inbox:{bobs_inbox}"]
    )
    assert status == 404 and body["error"]["reason"] == "NOT_FOUND", body  # A3
    assert (await _tool(alice, action="list"))[1]["endpoints"] == []

    for _ in range(2):
        assert (await _tool(alice, action="register", url=receiver.url, events=["call_ends"]))[
            0
        ] == 200
    status, body = await _tool(alice, action="register", url=receiver.url, events=["call_ends"])
    assert status == 400 and body["error"]["reason"] == "STORED_LIMIT", body
    assert body["error"]["metadata"]["setting"] == "GATEWAY_WEBHOOKS_MAX_ENDPOINTS"
    assert len((await _tool(alice, action="list"))[1]["endpoints"]) == 2


async def test_another_tenant_cannot_see_or_change_an_endpoint_A3_N2(
    start_gateway, api, alice_token, make_token, receiver
):
    """A3 N2: bob gets NOT_FOUND for alice's endpoint whatever he tries, and his list
    does not show it."""
    gateway = await start_gateway(**LOOPBACK)
    alice = api(alice_token, base_url=gateway.url)
    bob = api(await make_token("user:bob"), base_url=gateway.url)
    made = (await _tool(alice, action="register", url=receiver.url, events=["call_ends"]))[1]
    for action in ("get", "rotate", "delete", "deliveries"):
        status, body = await _tool(bob, action=action, endpoint_id=made["endpoint_id"])
        assert status == 404 and body["error"]["reason"] == "NOT_FOUND", (action, body)
    assert (await _tool(bob, action="list"))[1]["endpoints"] == []
    status, got = await _tool(alice, action="get", endpoint_id=made["endpoint_id"])
    assert status == 200 and got["secret_rotated_at"] is None


# ------------------------------------------------------------------ one attempt


def _sender(allow: str = "127.0.0.1/32", timeout: float = 5.0, max_bytes: int = 1024) -> Sender:
    policy = AddressPolicy(parse_networks(allow, "GATEWAY_WEBHOOKS_ALLOW"))
    return Sender(policy, timeout_seconds=timeout, max_response_bytes=max_bytes)


async def test_an_attempt_is_signed_as_standard_webhooks_says_N2(receiver):
    """N2: webhook-id, webhook-timestamp and webhook-signature verify with the
    standardwebhooks package's own verifier; the body is the event's JSON."""
    from datetime import UTC, datetime

    secret = new_secret()
    body = event_body("call.ended", datetime.now(UTC), {"call_id": "c1", "state": "completed"})
    sender = _sender()
    try:
        outcome = await sender.send(receiver.url, secret, "msg_1", body)
    finally:
        await sender.close()
    assert outcome.delivered and outcome.http_status == 200
    (got,) = receiver.requests
    assert got.headers["webhook-id"] == "msg_1" and got.path == "/hook"
    assert Webhook(secret).verify(got.body, got.headers) == json.loads(body)
    with pytest.raises(Exception, match="signature"):
        Webhook(new_secret()).verify(got.body, got.headers)


async def test_an_attempt_follows_no_redirect_and_rechecks_the_address_N2():
    """N2: a 307 to a loopback address is a failed attempt naming the redirect, and the
    address it points at gets nothing; without the allow-list the send-time check
    refuses the loopback receiver before connecting."""
    target = await Receiver(host="127.0.0.2").start()
    redirecting = await Receiver(status=307, headers={"location": target.url}).start()
    sender = _sender()
    strict = _sender(allow="")
    try:
        outcome = await sender.send(redirecting.url, new_secret(), "msg_r", b"{}")
        assert not outcome.delivered and outcome.http_status == 307
        assert "redirects are not followed" in outcome.error
        refused = await strict.send(target.url, new_secret(), "msg_s", b"{}")
        assert not refused.delivered and "loopback" in refused.error
        assert "GATEWAY_WEBHOOKS_ALLOW" in refused.error
        await asyncio.sleep(0)
        assert len(redirecting.requests) == 1 and target.requests == []
    finally:
        await sender.close()
        await strict.close()
        await target.stop()
        await redirecting.stop()


async def test_an_attempt_is_bounded_in_time_and_in_what_it_reads_N2_B():
    """N2 B: a receiver that never answers fails the attempt at the timeout; a huge
    error answer is cut (at most max_response_bytes read)."""
    held: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    silent = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    loud = await Receiver(status=500, answer=b"x" * 1_000_000).start()
    sender = _sender(timeout=0.5)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome = await sender.send(f"http://127.0.0.1:{port}/", new_secret(), "msg_t", b"{}")
        assert not outcome.delivered and "no answer within 0.5 s" in outcome.error
        assert loop.time() - started < 2
        cut = await sender.send(loud.url, new_secret(), "msg_l", b"{}")
        assert cut.http_status == 500 and cut.error.startswith("HTTP 500: xxx")
        assert len(cut.error) <= 300
    finally:
        await sender.close()
        for writer in held:
            writer.close()
        silent.close()
        await silent.wait_closed()
        await loud.stop()


async def test_the_cli_registers_lists_and_deletes_an_endpoint_N2_G3(
    start_gateway, alice_token, cli, receiver
):
    """N2 G3: `agentworks endpoints register` prints the id and the secret once, `list`
    and `deliveries` show the endpoint and its (no) deliveries, a refused address exits
    2 with the policy's words, `delete` removes it."""
    gateway = await start_gateway(**LOOPBACK)
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, out, err = await cli(
        "endpoints", "register", receiver.url, "--events", "call_ends", "--json", env=env
    )
    assert code == 0, (out, err)
    made = json.loads(out)
    assert made["secret"].startswith("whsec_")
    code, out, err = await cli("endpoints", "list", env=env)
    assert code == 0 and made["endpoint_id"] in out and "call_ends" in out, err
    code, out, err = await cli("endpoints", "deliveries", made["endpoint_id"], env=env)
    assert code == 0 and "no deliveries" in out + err
    code, out, err = await cli(
        "endpoints", "register", "http://169.254.169.254/", "--events", "call_ends", env=env
    )
    assert code == 2 and "link-local" in err and "GATEWAY_WEBHOOKS_ALLOW" in err
    code, out, err = await cli("endpoints", "delete", made["endpoint_id"], env=env)
    assert code == 0 and "deleted endpoint" in out
    code, out, err = await cli("endpoints", "get", made["endpoint_id"], env=env)
    assert code == 4, (out, err)


async def test_an_attempt_resolves_once_and_connects_to_the_checked_address_N2(
    receiver, monkeypatch
):
    """N2, DNS rebinding: the host name is resolved once per attempt and the attempt
    connects to the address that was checked (a second answer pointing elsewhere is
    never asked for); the name still goes in the Host header."""
    loop = asyncio.get_running_loop()
    answers: list[str] = []
    real = loop.getaddrinfo

    async def rebinding(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.test":
            return await real(host, port, *args, **kwargs)
        answers.append(host)
        address = "127.0.0.1" if len(answers) == 1 else "169.254.169.254"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(loop, "getaddrinfo", rebinding)
    sender = _sender()
    try:
        url = f"http://rebind.test:{receiver.port}/hook"
        outcome = await sender.send(url, new_secret(), "msg_dns", b"{}")
    finally:
        await sender.close()
    assert outcome.delivered, outcome
    assert answers == ["rebind.test"]
    (got,) = receiver.requests
    assert got.headers["host"] == f"rebind.test:{receiver.port}"
