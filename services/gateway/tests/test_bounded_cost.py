"""The gateway under attack (B5-B7, B10; issues 35 and 43): slow and many connections,
huge and wide bodies, and many long-polls from one principal cannot stall another user.

Attacks come from 127.0.0.1 and the victim (alice, with a token) from 127.0.0.2, as two
clients on two addresses would; the caps are scaled down by settings so each test runs
in a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from agentworks.server import shares
from agentworks.server.testing import until
from tests.fixtures.neighbours import Victim, assert_unharmed, attacker, attacking

SEND = "/api/v1/tools/messages"
MIB = 1024 * 1024
VICTIM_ADDRESS = "127.0.0.2"
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


def _client(url: str, token: str, local_address: str = "127.0.0.1") -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        transport=httpx.AsyncHTTPTransport(local_address=local_address),
    )


@pytest.fixture
async def victim_of(make_token, demo) -> AsyncIterator[Callable]:
    """`await victim_of(gateway)` -> a Victim: alice, from another address, reading her
    conversation's inbox (a send and a read of messaging through the gateway)."""
    clients: list[httpx.AsyncClient] = []

    async def make(gateway) -> Victim:
        client = _client(gateway.url, await make_token("user:alice"), VICTIM_ADDRESS)
        clients.append(client)
        sent = await client.post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
        assert sent.status_code == 200, sent.text
        inbox = sent.json()["inbox_id"]

        async def read() -> None:
            response = await client.post(SEND, json={"action": "read", "inbox_id": inbox})
            assert response.status_code == 200, response.text

        return Victim(read)

    yield make
    for client in clients:
        await client.aclose()


async def _open(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parsed = httpx.URL(url)
    return await asyncio.open_connection(parsed.host, parsed.port)


@contextlib.asynccontextmanager
async def out_of_process(attack: str, concurrency: int, **values: object) -> AsyncIterator[None]:
    """Run `attack` (the body of `async def once():`, with `values` as globals) in
    `concurrency` loops in another process while the block runs: an attacker is another
    machine, its own work is not the gateway's (in this process it would stall the
    victim's client too)."""
    script = "\n".join(
        [
            "import asyncio, sys, time",
            *(f"{name} = {value!r}" for name, value in values.items()),
            "async def once():",
            textwrap.indent(textwrap.dedent(attack), "    "),
            "async def loop():",
            "    while True:",
            "        try:",
            "            await once()",
            "        except Exception:",
            "            await asyncio.sleep(0.01)",
            "async def main():",
            f"    tasks = [asyncio.create_task(loop()) for _ in range({concurrency})]",
            "    print('ready', flush=True)",
            "    await asyncio.gather(*tasks)",
            "asyncio.run(main())",
        ]
    )
    # The attack is under way (a second more) before the victim measures.
    async with attacker(script, warmup=1.0) as running:
        assert running.lines == ["ready"], running.lines
        yield


# --------------------------------------------------------------------- connections (B6)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="200 connections send their headers a byte every 0.2 s (slowloris), without a token",
    action="another user with a token reads her inbox meanwhile, from another address",
    check="each slow connection is cut 408 at the header timeout (1 s here); the user's "
    "p99 within 3x calm, none over 1 s",
)
async def test_slow_headers_are_cut_at_the_header_timeout_and_others_are_served_B5_B6(
    start_gateway, victim_of
):
    """Issue 43 item 1: 1,100 connections sending headers one byte every 2 s made 1,256 of
    a victim's 1,257 requests answer 503, and a half-sent request was still open after
    90 s. Now each is cut at GATEWAY_HEADER_TIMEOUT_SECONDS, and past
    GATEWAY_MAX_CONNECTIONS the longest idle connection makes room for a new one."""
    gateway = await start_gateway(
        GATEWAY_HEADER_TIMEOUT_SECONDS="1",
        GATEWAY_MAX_CONNECTIONS="400",
        GATEWAY_MAX_CONNECTIONS_PER_ADDRESS="400",
    )
    victim = await victim_of(gateway)
    calm = await victim.measure(seconds=1.5)
    port = httpx.URL(gateway.url).port
    async with out_of_process(
        """
        reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
        writer.write(b"POST /api/v1/tools/messages HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
        try:
            while True:
                writer.write(b"X")  # a header that never ends
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(200), 0.2)
                    return  # answered 408, or closed
                except TimeoutError:
                    pass
        finally:
            writer.close()
        """,
        concurrency=200,
        PORT=port,
    ):
        loud = await victim.measure_under(calm, seconds=3)
        # A slow connection of ours: cut 408 at the header timeout.
        reader, writer = await _open(gateway.url)
        started = time.monotonic()
        writer.write(f"POST {SEND} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
        answer = b""
        while not answer:
            writer.write(b"X")
            with contextlib.suppress(TimeoutError):
                answer = await asyncio.wait_for(reader.read(4096), 0.2)
        held = time.monotonic() - started
        writer.close()
    assert_unharmed(calm, loud, "200 slow connections")
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive whole within 1 s" in answer
    assert 0.9 < held < 2.0, f"a slow connection was held {held:.2f} s"


async def test_connections_past_the_per_address_cap_are_refused_at_once_B6(
    start_gateway, make_token
):
    """B6: an address holds at most GATEWAY_MAX_CONNECTIONS_PER_ADDRESS connections; the
    next is answered 429 and closed at once; another address is served meanwhile, and
    the address gets connections again as its own close."""
    gateway = await start_gateway(GATEWAY_MAX_CONNECTIONS_PER_ADDRESS="10")
    token = await make_token("user:alice")
    held = [await _open(gateway.url) for _ in range(10)]
    try:
        reader, writer = await _open(gateway.url)
        answer = await asyncio.wait_for(reader.read(4096), 5)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 429"), answer
        assert b"at most 10 at once (GATEWAY_MAX_CONNECTIONS_PER_ADDRESS)" in answer
        async with _client(gateway.url, token, VICTIM_ADDRESS) as other:
            assert (await other.get("/api/v1/tools")).status_code == 200
    finally:
        for _, writer in held:
            writer.close()
    async with _client(gateway.url, token) as again:

        async def served() -> bool:
            try:
                return (await again.get("/api/v1/tools")).status_code == 200
            except httpx.TransportError:
                return False

        await until(served, 5, what="the address is served again after its connections closed")


# ------------------------------------------------------------------------ bodies (B6)


async def test_bodies_past_the_cap_are_413_before_they_are_read_on_api_and_mcp_B6(
    start_gateway, make_token
):
    """Issue 35 item 5: a body past GATEWAY_MAX_BODY_BYTES is 413 on /api as on /mcp (/api
    answered 400), refused from its Content-Length before a byte of it is sent, and a
    chunked one as soon as it passes the cap, not read to the end."""
    gateway = await start_gateway(GATEWAY_MAX_BODY_BYTES="65536")
    token = await make_token("user:alice")
    for path in (SEND, "/mcp"):
        reader, writer = await _open(gateway.url)
        try:
            started = time.monotonic()
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: {100 * MIB}\r\n\r\n".encode()
            )
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 413"), (path, head)
            assert time.monotonic() - started < 1, path
            assert b"the limit is 65536 bytes" in await asyncio.wait_for(reader.read(4096), 5)
        finally:
            writer.close()
        reader, writer = await _open(gateway.url)
        try:  # chunked: refused while it streams in
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "Transfer-Encoding: chunked\r\n\r\n".encode()
            )
            for _ in range(3):
                writer.write(b"%x\r\n%s\r\n" % (32 * 1024, b" " * 32 * 1024))
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 413"), (path, head)
        finally:
            writer.close()


def _wide_parts(count: int) -> bytes:
    parts = ", ".join(['{"text": "x"}'] * count)
    return b'{"action": "send", "crew": "demo", "message": "m", "parts": [' + parts.encode() + b"]}"


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="wide JSON: 50,000 parts in a 0.7 MB body to /api/v1/tools/messages, 4 at a time",
    action="another user reads her inbox meanwhile, from another address",
    check="each is refused 400 naming parts and their count before any schema walk; the "
    "user's p99 within 3x calm, none over 1 s",
)
async def test_wide_json_is_refused_from_its_size_before_the_schema_walk_B1_B5(
    gateway, make_token, victim_of
):
    """Issue 35 item 2: 50,000 `parts` (750 KB, under the 1 MiB cap) took 3.7 s of the
    serving loop to refuse, because the tool schema check walked every part before the
    size rule; 16 of them, 8 at a time, pushed another user's sends from 0.015 s to
    12-22 s. Now the size rules (len) run first, and what the schema walks is bounded."""
    victim = await victim_of(gateway)
    body = _wide_parts(50_000)
    assert 500_000 < len(body) < MIB
    token = await make_token("user:mallory")
    mallory = _client(gateway.url, token)
    refused: list[float] = []

    async def wide() -> None:
        started = time.monotonic()
        response = await mallory.post(
            SEND, content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400, response.text
        assert "parts: has 50000 items; at most 1000 are taken" in response.text
        refused.append(time.monotonic() - started)

    try:
        await wide()
        calm = await victim.measure(seconds=1.5)
        async with out_of_process(
            """
            import httpx
            parts = ", ".join(['{"text": "x"}'] * PARTS).encode()
            BODY = b'{"action": "send", "crew": "demo", "message": "m", "parts": [' + parts + b"]}"
            async with httpx.AsyncClient(base_url=URL, timeout=30) as client:
                await client.post(
                    "/api/v1/tools/messages",
                    content=BODY,
                    headers={"Authorization": "Bearer " + TOKEN, "content-type": JSON},
                )
            """,
            concurrency=4,
            URL=gateway.url,
            PARTS=50_000,
            JSON="application/json",
            TOKEN=token,
        ):
            loud = await victim.measure_under(calm, seconds=3)
            await wide()  # still refused as fast under the attack
        # Over MCP too: an isError result, as fast.
        mcp = await mallory.post(
            "/mcp",
            content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
            b'{"name": "messages", "arguments": ' + body + b"}}",
            headers=MCP_HEADERS,
        )
    finally:
        await mallory.aclose()
    assert_unharmed(calm, loud, "wide JSON")
    assert max(refused) < 1, f"a wide body took {max(refused):.2f} s to refuse"
    result = mcp.json()["result"]
    assert result["isError"], result
    assert "parts: has 50000 items; at most 1000 are taken" in json.dumps(result)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="wide JSON over MCP: the 0.7 MB tools/call of 50,000 parts to /mcp, 4 at a time",
    action="another user reads her inbox meanwhile, from another address",
    check="the user's p99 within 3x calm or 200 ms (a known gap, below), none over 1 s (the "
    "refusal's words over MCP are checked by the /api wide-JSON test)",
)
async def test_wide_json_over_mcp_leaves_another_user_served_B1_B5(gateway, make_token, victim_of):
    """B1 B5 over MCP: the same attack as above through `tools/call`. The gateway's own
    look at the body (is it a `subscriptions/listen`?) is paced like /api's parse, but
    the MCP SDK parses the body again, into its models, before our tool runs, so the
    victim's p99 goes to 90-130 ms on a slow 2-core machine (the known gap in
    docs/reliability.md); this holds it there."""
    victim = await victim_of(gateway)
    token = await make_token("user:mallory")
    calm = await victim.measure(seconds=1.5)
    async with out_of_process(
        """
        import httpx
        parts = ", ".join(['{"text": "x"}'] * PARTS).encode()
        ARGS = b'{"action": "send", "crew": "demo", "message": "m", "parts": [' + parts + b"]}"
        BODY = (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": '
                b'{"name": "messages", "arguments": ' + ARGS + b"}}")
        async with httpx.AsyncClient(base_url=URL, timeout=30) as client:
            await client.post(
                "/mcp", content=BODY, headers={"Authorization": "Bearer " + TOKEN, **HEADERS}
            )
        """,
        concurrency=4,
        URL=gateway.url,
        PARTS=50_000,
        TOKEN=token,
        HEADERS=MCP_HEADERS,
    ):
        loud = await victim.measure_under(calm, seconds=3, floor=0.2)
    assert_unharmed(calm, loud, "wide JSON over MCP", floor=0.2)


# ------------------------------------------------------------------ long-polls (B6, B7)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="one token holds 40 reads with wait_seconds=25 (its share: 4 long-polls), "
    "asking again after each refusal's Retry-After",
    action="another user reads her inbox meanwhile, from another address",
    check="past its share the token gets 429 with Retry-After and reason PRINCIPAL_SHARE; "
    "the user's p99 within 3x calm, none over 1 s",
)
async def test_many_long_polls_of_one_principal_get_429_and_leave_others_unharmed_B5_B7(
    gateway, make_token, victim_of
):
    """Issue 43 item 2: one token holding 1,100 reads with wait_seconds=25 made 434 of a
    victim's 441 requests answer 503 (one global cap, no per-principal one). Now each
    principal holds its own share of long-polls; past it 429 with Retry-After."""
    shares.configure(shares.Shares(shares.Share(requests=16, waits=4)))
    try:
        victim = await victim_of(gateway)
        mallory = _client(gateway.url, await make_token("user:mallory"))
        sent = await mallory.post(SEND, json={"action": "send", "crew": "demo", "message": "mine"})
        inbox = sent.json()["inbox_id"]
        refusals: list[httpx.Response] = []
        try:
            calm = await victim.measure(seconds=1.5)

            async def hold() -> None:
                response = await mallory.post(
                    SEND, json={"action": "read", "inbox_id": inbox, "wait_seconds": 25}
                )
                if response.status_code != 200:
                    refusals.append(response)
                    # Asked again after Retry-After: a flood of refused requests is
                    # a request rate, not what this test measures.
                    await asyncio.sleep(float(response.headers.get("Retry-After", 1)))

            async with attacking(hold, concurrency=40, warmup=1.0):
                loud = await victim.measure_under(calm, seconds=3)
        finally:
            await mallory.aclose()
    finally:
        shares.configure(None)
    assert_unharmed(calm, loud, "40 long-polls of one token")
    assert refusals, "the token's long-polls past its share were not refused"
    for response in refusals[:20]:
        assert response.status_code == 429, response.text
        assert int(response.headers["Retry-After"]) >= 1
        error = response.json()["error"]
        assert error["code"] == "RESOURCE_EXHAUSTED"
        assert error["reason"] == "PRINCIPAL_SHARE", error
        assert error["retry_after_seconds"] > 0


async def test_a_long_poll_past_its_share_over_mcp_is_an_error_result_saying_so_B7(
    gateway, make_token, demo
):
    """B7 over MCP: past a principal's long-polls the tool result is isError with
    RESOURCE_EXHAUSTED and when to retry."""
    shares.configure(shares.Shares(shares.Share(requests=16, waits=1)))
    try:
        async with _client(gateway.url, await make_token("user:mallory")) as mallory:
            sent = await mallory.post(SEND, json={"action": "send", "crew": "demo", "message": "m"})
            inbox = sent.json()["inbox_id"]
            holding = asyncio.create_task(
                mallory.post(SEND, json={"action": "read", "inbox_id": inbox, "wait_seconds": 5})
            )
            # Time for the read to take mallory's one long-poll in the gateway (its share
            # is in-process state that no public call shows, so nothing to await).
            await asyncio.sleep(0.3)
            call = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "messages",
                    "arguments": {"action": "read", "inbox_id": inbox, "wait_seconds": 5},
                },
            }
            response = await mallory.post("/mcp", json=call, headers=MCP_HEADERS)
            holding.cancel()
    finally:
        shares.configure(None)
    result = response.json()["result"]
    assert result["isError"], result
    text = json.dumps(result)
    assert "RESOURCE_EXHAUSTED" in text and "retry in" in text, text


# ------------------------------------------------------------------------ numbers (B10)


async def test_an_integer_past_the_stated_digits_is_refused_in_our_words_B10(
    gateway, make_token, demo
):
    """Issue 43 item 6: integers over 4,300 digits were refused with Python's message
    about sys.set_int_max_str_digits. The bound is stated (docs/mcp.md) and the refusal
    names the argument; an integer within it is taken."""
    async with _client(gateway.url, await make_token("user:alice")) as alice:
        body = (
            b'{"action": "send", "crew": "demo", "message": "m", '
            b'"parts": [{"data": {"n": ' + b"9" * 5000 + b"}}]}"
        )
        json_type = {"content-type": "application/json"}
        response = await alice.post(SEND, content=body, headers=json_type)
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert "parts.0.data.n holds an integer of 5000 digits" in message, message
        assert "at most 4300 digits" in message and "set_int_max_str_digits" not in message
        within = body.replace(b"9" * 5000, b"9" * 4300)
        ok = await alice.post(SEND, content=within, headers=json_type)
        assert ok.status_code == 200, ok.text
