"""The console live by push (N4) in a real browser (chromium under Playwright, the suite of
`tests.fixtures.console`): a new reply and a delivery's changed status appear on the open
transcript, and a call's panel follows the call to its end, with no request in the
browser's network log while they do: one event stream per page, no poll."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Page, expect

from agentworks.client import MessagingClient
from agentworks.core.identity import Minter
from agentworks.server.testing.waiting import until
from tests.fixtures.console import QUESTION

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

WAIT_MS = 20_000
POLLS = ("/entries?", "/live?")


async def signed_in(browser: Any, suite: Any, who: str) -> tuple[Page, list[str]]:
    """A new browser context signed in as `who`, and the log of its requests (URLs)."""
    ctx = await browser.new_context(base_url=suite.url)
    page = await ctx.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(f"{request.method} {request.url}"))
    await page.goto("/console/sign-in")
    await page.get_by_label("API token").fill(suite.tokens[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_test_id("principal")).to_be_visible()
    return page, requests


async def test_a_reply_and_a_delivery_turning_handled_show_with_no_poll_request_N4_B6(
    browser, console_suite, signing_keys
):
    """N4: alice's open transcript shows her message's delivery `pending`, then `in_turn`
    when the crew's agent claims it, the agent's reply as it is sent, and the delivery
    `handled` when the turn ends, without a reload and with no request in the network
    log meanwhile (one event stream, opened with the page); B6: the stream holds one of
    the gateway's waits, given back when the page closes."""
    suite = console_suite
    await suite.tool(
        "ops", "targets", {"action": "register", "target": "crew:live", "owner": "user:owner"}
    )
    sent = await suite.tool(
        "alice", "messages", {"action": "send", "crew": "live", "message": "hello live"}
    )
    page, requests = await signed_in(browser, suite, "alice")
    await page.goto(f"/console/conversations/{sent['conversation_id']}")
    transcript = page.get_by_role("list", name="Transcript")
    status = transcript.get_by_test_id("delivery").first.locator(".status")
    await expect(status).to_have_text("pending")
    await page.evaluate("window.notReloaded = true")
    admission = suite.gateway.gateway.admission
    await until(lambda: admission.waits == 1, what="the page's stream holds a wait")
    opened = len(requests)

    key = signing_keys.ensure("gateway")[0]
    address = suite.gateway.gateway.config.messaging_address
    async with MessagingClient(address, identity=Minter("agent:live/bot", key)) as bot:
        turn = await bot.claim_turn(["crew:live"], wait_seconds=10)
        assert turn is not None
        await expect(status).to_have_text("in_turn", timeout=WAIT_MS)
        await bot.send_message(turn.reply_inbox_id, "pushed reply")
        await expect(transcript).to_contain_text("pushed reply", timeout=WAIT_MS)
        await bot.complete_turn(turn.turn_id)
    await expect(status).to_have_text("handled", timeout=WAIT_MS)

    assert await page.evaluate("window.notReloaded") is True
    assert requests[opened:] == [], "the browser asked for something while it waited"
    streams = [r for r in requests if "/stream" in r]
    assert len(streams) == 1, requests
    assert not [r for r in requests if any(poll in r for poll in POLLS)]
    await page.context.close()
    await until(lambda: admission.waits == 0, what="the closed page's wait given back")


async def test_a_calls_panel_follows_it_to_its_end_by_push_with_no_poll_request_N4(
    browser, console_suite
):
    """N4: the open call's panel shows the question when the runtime asks it and
    `completed` with the answer once it is answered (over the API, elsewhere), with no
    request in the browser's network log meanwhile."""
    suite = console_suite
    call = await suite.tool(
        "alice",
        "functions",
        {"action": "call", "crew": "demo", "function": "report", "inputs": {"topic": "push"}},
    )
    page, requests = await signed_in(browser, suite, "alice")
    await page.goto(f"/console/calls/{call['call_id']}")
    await expect(page.get_by_test_id("call-question")).to_have_text(QUESTION, timeout=WAIT_MS)
    opened = len(requests)
    await suite.tool(
        "alice", "functions", {"action": "reply", "call_id": call["call_id"], "text": "CSV"}
    )
    await expect(page.get_by_test_id("call-status")).to_have_text("completed", timeout=WAIT_MS)
    await expect(page.get_by_test_id("call-answer")).to_have_text("report done as CSV")
    assert requests[opened:] == [], "the browser asked for something while it waited"
    assert len([r for r in requests if "/stream" in r]) == 1, requests
    assert not [r for r in requests if any(poll in r for poll in POLLS)]
    await page.context.close()


async def test_a_live_page_stops_when_its_sessions_token_is_revoked_A1_N4_V3(
    browser, console_suite, signing_keys
):
    """A1 N4 V3, as an attacker: dave's open transcript follows his conversation by push;
    his token is revoked and the agent then replies. The page's stream ends with the
    refusal shown as an alert (within the suite's 1 s re-check, or before the reply is
    sent), and the reply never reaches the page."""
    suite = console_suite
    created = await suite.tool("ops", "tokens", {"action": "create", "principal": "user:dave"})
    suite.tokens["dave"] = created["token"]
    await suite.tool(
        "ops", "targets", {"action": "register", "target": "crew:gone", "owner": "user:owner"}
    )
    sent = await suite.tool("dave", "messages", {"action": "send", "crew": "gone", "message": "hi"})
    page, _ = await signed_in(browser, suite, "dave")
    await page.goto(f"/console/conversations/{sent['conversation_id']}")
    transcript = page.get_by_role("list", name="Transcript")
    admission = suite.gateway.gateway.admission
    await until(lambda: admission.waits == 1, what="the page's stream is open")

    key = signing_keys.ensure("gateway")[0]
    address = suite.gateway.gateway.config.messaging_address
    async with MessagingClient(address, identity=Minter("agent:gone/bot", key)) as bot:
        turn = await bot.claim_turn(["crew:gone"], wait_seconds=10)
        assert turn is not None
        await expect(transcript.get_by_test_id("delivery").first.locator(".status")).to_have_text(
            "in_turn", timeout=WAIT_MS
        )
        await suite.tool("ops", "tokens", {"action": "revoke", "token_id": created["token_id"]})
        await bot.send_message(turn.reply_inbox_id, "after the revocation")
        await bot.complete_turn(turn.turn_id)
    await expect(page.get_by_role("alert")).to_contain_text("was revoked", timeout=WAIT_MS)
    await until(lambda: admission.waits == 0, what="the ended stream's wait given back")
    await expect(transcript).not_to_contain_text("after the revocation")
    await page.context.close()
