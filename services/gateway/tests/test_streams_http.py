"""The HTTP API's event streams (N1, B6, B7, A3): an inbox's messages and a call's changes
as server-sent events over real HTTP, from the in-process gateway and services."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from agentworks.server.shares import Share, Shares, configure, shares
from agentworks.server.testing import until

STREAMS = "/api/v1/streams"
SEND = "/api/v1/tools/messages"


class Events:
    """The events of one open stream, read as they come."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()
        self.comments: list[str] = []

    async def next(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next event (`{"event", "id", "data"}`), skipping comments and `retry:`."""
        event: dict[str, Any] = {}
        async with asyncio.timeout(timeout):
            async for line in self.lines:
                if line.startswith(":"):
                    self.comments.append(line)
                elif not line:
                    if "data" in event:
                        event["data"] = json.loads(event["data"])
                        return event
                    event = {}
                else:
                    field, _, value = line.partition(": ")
                    event[field] = value
        raise AssertionError(f"the stream ended; comments: {self.comments}")

    async def comment(self, timeout: float) -> str:
        """The next comment line (a heartbeat)."""
        async with asyncio.timeout(timeout):
            async for line in self.lines:
                if line.startswith(":"):
                    return line
        raise AssertionError("the stream ended without a comment")


@contextlib.asynccontextmanager
async def stream(client: httpx.AsyncClient, path: str, **kwargs: Any) -> AsyncIterator[Events]:
    async with client.stream("GET", path, **kwargs) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Events(response)


async def refused(client: httpx.AsyncClient, path: str, **kwargs: Any) -> httpx.Response:
    """A stream request that must be refused at once (its JSON error read)."""
    async with client.stream("GET", path, **kwargs) as response:
        await response.aread()
        assert response.status_code != 200, "the stream was opened"
        return response


async def _conversation(api: Any, token: str, bot: Any, demo: str) -> tuple[str, str]:
    """alice's conversation with crew:demo: (inbox_id, the turn's reply inbox)."""
    sent = await api(token).post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
    assert sent.status_code == 200, sent.text
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    await bot.complete_turn(turn.turn_id)
    return sent.json()["inbox_id"], turn.reply_inbox_id


async def test_an_inbox_stream_pushes_each_reply_and_resumes_after_last_event_id_N1(
    gateway, api, alice_token, demo, bot
):
    """N1: the inbox's stream sends each reply as it is sent, as `messages read` shows it,
    with the cursor as its id; reopened with Last-Event-ID it goes on after that message,
    none lost or repeated."""
    inbox_id, reply_inbox = await _conversation(api, alice_token, bot, demo)
    alice = api(alice_token)
    await bot.send_message(reply_inbox, "one")
    async with stream(alice, f"{STREAMS}/inboxes/{inbox_id}") as events:
        first = await events.next()
        assert (first["event"], first["data"]["text"]) == ("message", "one")
        await bot.send_message(reply_inbox, "two")  # sent while the stream is open
        second = await events.next()
        assert second["data"]["text"] == "two"
    read = (await alice.post(SEND, json={"action": "read", "inbox_id": inbox_id})).json()
    assert [first["data"], second["data"]] == read["messages"]
    assert second["id"] == read["next_cursor"]

    await bot.send_message(reply_inbox, "three")  # while nobody listens
    headers = {"Last-Event-ID": first["id"]}
    async with stream(alice, f"{STREAMS}/inboxes/{inbox_id}", headers=headers) as events:
        assert [(await events.next())["data"]["text"] for _ in range(2)] == ["two", "three"]
    async with stream(alice, f"{STREAMS}/inboxes/{inbox_id}?after={second['id']}") as events:
        assert (await events.next())["data"]["text"] == "three"


async def test_an_idle_stream_sends_heartbeat_comments_and_bad_settings_are_refused_N1(
    gateway, api, alice_token, demo, bot
):
    """N1: with nothing to send, a comment line every heartbeat_seconds keeps the stream
    open; a heartbeat outside 5-60 s is refused 400 before any stream, naming the rule."""
    inbox_id, _ = await _conversation(api, alice_token, bot, demo)
    alice = api(alice_token)
    path = f"{STREAMS}/inboxes/{inbox_id}"
    async with stream(alice, path + "?heartbeat_seconds=5") as events:
        assert (await events.comment(timeout=9)).startswith(": heartbeat ")
    bad = await refused(alice, path + "?heartbeat_seconds=2")
    assert bad.status_code == 400
    assert bad.json()["error"]["reason"] == "FIELD_RULE"
    assert bad.json()["error"]["metadata"]["field"] == "heartbeat_seconds"


async def test_another_principals_inbox_or_call_is_not_found_as_the_tools_answer_A3_N1(
    gateway, api, alice_token, make_token, demo, bot, echo
):
    """A3: bob's token opens neither alice's inbox nor her call: 404 NOT_FOUND as `messages
    read` and `functions status` answer him; without a token, 401."""
    inbox_id, _ = await _conversation(api, alice_token, bot, demo)
    called = await api(alice_token).post(
        "/api/v1/tools/functions",
        json={"action": "call", "crew": "demo", "function": echo, "inputs": {"text": "x"}},
    )
    call_id = called.json()["call_id"]
    bob = api(await make_token("user:bob"))
    for path, tool, args in (
        (f"{STREAMS}/inboxes/{inbox_id}", "messages", {"action": "read", "inbox_id": inbox_id}),
        (f"{STREAMS}/calls/{call_id}", "functions", {"action": "status", "call_id": call_id}),
    ):
        response = await refused(bob, path)
        by_tool = await bob.post(f"/api/v1/tools/{tool}", json=args)
        assert response.status_code == by_tool.status_code == 404
        assert response.json()["error"]["code"] == by_tool.json()["error"]["code"] == "NOT_FOUND"
        assert (await refused(api(None), path)).status_code == 401


async def test_a_call_stream_sends_each_change_and_ends_after_the_terminal_status_N1(
    gateway, api, alice_token, demo, echo, runtime
):
    """N1: the call's stream sends its status now, then progress and messages as the
    runtime reports them, then the completed status and `end`; the ids resume after the
    messages seen."""
    alice = api(alice_token)
    called = await alice.post(
        "/api/v1/tools/functions",
        json={"action": "call", "crew": "demo", "function": echo, "inputs": {"text": "x"}},
    )
    call_id = called.json()["call_id"]
    async with stream(alice, f"{STREAMS}/calls/{call_id}") as events:
        now = await events.next()
        assert (now["event"], now["data"]["status"]) == ("status", "running")
        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None and execution.call_id == call_id
        await runtime.report(call_id, progress="halfway", messages=["working"])
        seen: list[dict[str, Any]] = []
        while not any(e["data"]["progress"] == "halfway" for e in seen):
            seen.append(await events.next())
        await runtime.finish_execution(call_id, final_message="done")
        while True:
            event = await events.next()
            if event["event"] == "end":
                break
            seen.append(event)
        assert seen[-1]["data"]["status"] == "completed"
        assert event["data"] == {"call_id": call_id, "status": "completed"}
        texts = [m["text"] for e in seen for m in e["data"]["messages"]]
        assert "working" in texts
        assert texts.count("working") == 1  # each message once
        async with asyncio.timeout(5):
            assert await anext(events.lines, None) is None  # the stream ended
    last = seen[-1]["id"]
    async with stream(alice, f"{STREAMS}/calls/{call_id}", headers={"Last-Event-ID": last}) as ev:
        again = await ev.next()
        assert again["data"]["status"] == "completed"
        assert again["data"]["messages"] == []  # nothing after the cursors it resumed from


async def test_streams_wait_in_the_wait_pool_not_the_request_pool_503_past_it_B6(
    start_gateway, api, alice_token, demo, bot, make_token
):
    """B6: an open stream holds one of GATEWAY_MAX_WAITS, not a request: with the pool
    full another stream is refused 503 at once with Retry-After (reason OVERLOADED, pool
    waits), while tool requests are still served."""
    gateway = await start_gateway(GATEWAY_MAX_WAITS="1", GATEWAY_MAX_REQUESTS="1")
    alice = api(alice_token, base_url=gateway.url)
    sent = await alice.post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
    inbox_id = sent.json()["inbox_id"]
    path = f"{STREAMS}/inboxes/{inbox_id}"
    async with stream(alice, path):
        full = await refused(alice, path)
        assert full.status_code == 503
        assert full.headers["retry-after"] == "1"
        error = full.json()["error"]
        assert (error["reason"], error["metadata"]["pool"]) == ("OVERLOADED", "waits")
        read = await alice.post(SEND, json={"action": "read", "inbox_id": inbox_id})
        assert read.status_code == 200  # the one request place is free: the stream waits
        assert gateway.gateway.admission.waits == 1
    # Its place comes back when the gateway sees the client close the stream.
    await until(lambda: gateway.gateway.admission.waits == 0, timeout=5)
    async with stream(alice, path):
        pass


async def test_a_principals_streams_are_capped_by_its_share_429_others_unaffected_B7(
    gateway, api, alice_token, make_token, demo, bot
):
    """B7: past alice's share of waits her next stream is refused 429 with Retry-After
    (reason PRINCIPAL_SHARE) while bob still opens his; closing hers gives it back."""
    inbox_id, _ = await _conversation(api, alice_token, bot, demo)
    bob_token = await make_token("user:bob")
    bob_sent = await api(bob_token).post(
        SEND, json={"action": "send", "crew": "demo", "message": "hi"}
    )
    bob_inbox = bob_sent.json()["inbox_id"]
    alice = api(alice_token)
    path = f"{STREAMS}/inboxes/{inbox_id}"
    configure(Shares(own={"user:alice": Share(waits=2)}))
    try:
        async with contextlib.AsyncExitStack() as held:
            answer: httpx.Response | None = None
            for _ in range(3):  # the gateway's hold alone stops her at the third
                response = await held.enter_async_context(alice.stream("GET", path))
                if response.status_code != 200:
                    answer = response
                    await response.aread()
                    break
            assert answer is not None, "alice opened more streams than her share"
            assert answer.status_code == 429
            assert answer.headers["retry-after"] == "1"
            assert answer.json()["error"]["reason"] == "PRINCIPAL_SHARE"
            async with stream(api(bob_token), f"{STREAMS}/inboxes/{bob_inbox}"):
                pass
        # Closed streams give their waits back once each side has seen the close (here the
        # gateway and messaging share one table: each of her streams held two) — at once,
        # not at the services' next heartbeat (15 s): the pending read is cancelled.
        await until(
            lambda: shares().waits_held("user:alice") == 0,
            timeout=3,
            what="alice's waits given back",
        )
        async with stream(alice, path):
            pass
    finally:
        configure(None)


async def test_an_open_stream_ends_when_its_token_is_revoked_on_another_replica_A1_N1(
    start_gateway, api, operator_token, demo, bot
):
    """A1 G1 N1, as an attacker: carol opens an inbox stream and a call stream on one
    replica; the operator revokes her token on the other. Her streams end within the
    re-check (an `event: error` naming the revoked token, then the end of the stream),
    and a reply sent after the revocation never reaches her."""
    settings = {"GATEWAY_STREAM_RECHECK_SECONDS": "0.3"}
    first, second = await start_gateway(**settings), await start_gateway(**settings)
    operator = api(operator_token, base_url=second.url)
    created = await operator.post(
        "/api/v1/tools/tokens", json={"action": "create", "principal": "user:carol"}
    )
    token, token_id = created.json()["token"], created.json()["token_id"]
    carol = api(token, base_url=first.url)
    sent = await carol.post(SEND, json={"action": "send", "crew": "demo", "message": "hi"})
    inbox_id = sent.json()["inbox_id"]
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    async with stream(carol, f"{STREAMS}/inboxes/{inbox_id}") as events:
        await bot.send_message(turn.reply_inbox_id, "before")
        assert (await events.next())["data"]["text"] == "before"
        revoked = await operator.post(
            "/api/v1/tools/tokens", json={"action": "revoke", "token_id": token_id}
        )
        assert revoked.status_code == 200
        await bot.send_message(turn.reply_inbox_id, "after the revocation")
        ended = await events.next(timeout=5)
        assert ended["event"] == "error", ended
        assert ended["data"]["reason"] == "CREDENTIALS_REVOKED"
        assert f"API token {token_id} was revoked" in ended["data"]["message"]
        rest = [line async for line in events.lines]  # the stream ends: nothing after
        assert not any("after the revocation" in line for line in rest), rest
    assert first.gateway.open_tokens._held == {}  # its hold went with the stream
    # Opening again is refused as any request would be.
    again = await refused(carol, f"{STREAMS}/inboxes/{inbox_id}")
    assert again.status_code == 401
