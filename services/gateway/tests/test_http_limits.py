"""The HTTP API bounds what one request can make the gateway hold or walk (P6, G1)."""

from __future__ import annotations

import asyncio

import httpx

MIB = 1024 * 1024
SEND = "/api/v1/tools/messages"


async def test_a_chunked_body_past_the_limit_is_refused_while_it_streams_in_P6_G1(
    gateway, api, alice_token, demo
):
    """P6 G1: a chunked body (no Content-Length) is refused as soon as it passes the
    1 MiB limit, not read whole first: a client that has sent 2 MiB of a body it says
    goes on gets its 413 without sending the rest (a 400 MiB body used to be taken in
    whole, 136 MB -> 875 MB of memory, before its size was looked at; it was a 400)."""
    url = httpx.URL(gateway.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(
            f"POST {SEND} HTTP/1.1\r\nHost: {url.host}\r\n"
            f"Authorization: Bearer {alice_token}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        start = b'{"action": "send", "crew": "demo", "message": "'
        writer.write(b"%x\r\n%s\r\n" % (len(start), start))
        for _ in range(2):
            writer.write(b"%x\r\n%s\r\n" % (MIB, b"x" * MIB))
        await writer.drain()
        # No terminating chunk: a server that reads the whole body first never answers.
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 413"), head
        rest = await asyncio.wait_for(reader.read(4096), 10)
        assert b"the limit is 1048576 bytes" in rest
    finally:
        writer.close()
    ok = await api(alice_token).post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
    assert ok.status_code == 200, ok.text


async def test_json_nested_too_deep_to_parse_is_a_clear_400_P6_G1(gateway, api, alice_token):
    """P6 G1: a body nested 100,000 deep, which Python's parser cannot follow, is a 400
    that says so (it was a plain-text 500)."""
    body = b'{"action": "send", "crew": "demo", "message": "m", "parts": ' + (
        b"[" * 100_000 + b"]" * 100_000 + b"}"
    )
    response = await api(alice_token).post(
        SEND, content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("request body nests objects and arrays too deep to read")


async def test_a_stalled_body_gets_408_and_idle_connections_make_room_P6_G1_B6(
    start_gateway, make_token
):
    """P6 G1 B6: a body that stops arriving is answered 408 after
    GATEWAY_BODY_TIMEOUT_SECONDS (it held a task and a connection for ever); past
    GATEWAY_MAX_CONNECTIONS open connections the longest idle one is closed to make room
    for a new one (idle connections used to take the place of requests: 503)."""
    gateway = await start_gateway(GATEWAY_BODY_TIMEOUT_SECONDS="0.5", GATEWAY_MAX_CONNECTIONS="3")
    token = await make_token("user:alice", label="alice")
    url = httpx.URL(gateway.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        writer.write(
            f"POST {SEND} HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Bearer {token}\r\n"
            'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"action"'.encode()
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 408"), head
        assert b"the request body did not arrive within 0.5 s" in await reader.read(4096)
    finally:
        writer.close()

    idle = [await asyncio.open_connection(url.host, url.port) for _ in range(3)]
    try:
        # Time for the gateway to accept the three: they send nothing, so nothing answers
        # that could be awaited instead.
        await asyncio.sleep(0.2)
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            served = await client.get("/healthz")
        assert served.status_code == 200
        # The longest idle connection was closed to make room.
        assert await asyncio.wait_for(idle[0][0].read(), 5) == b""
    finally:
        for _, held in idle:
            held.close()
