"""The console as a place to work (V7), in a real browser (Debian's chromium under
Playwright) against the real suite of `tests.fixtures.console`: signing in from a link
lands on the page asked for, with no error in the browser's console; a call made by an
agent from a conversation links to its caller, shows a timeline with durations and its
events after it completed; the conversation links to the call and to its schedule; times
are local and relative; ids copy; the conversations list searches by id and target and
pages with the list's cursors.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import expect

from agentworks.server.testing import waiting
from tests.fixtures.console import QUESTION, REPORT_ON

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

WAIT_MS = 20_000
# What console.js makes of a recent time: "now", "5 sec. ago", "2 min. ago" (Intl, en-US).
RELATIVE = re.compile(r"^(now|in \d+ \w+\.?|\d+ \w+\.? ago)$")


def _errors_of(page: Any) -> list[str]:
    """The browser console's errors and the failed responses of a page, as they come."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: seen.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return seen


async def test_signed_out_a_link_leads_to_sign_in_and_back_with_no_browser_error_V7(
    browser, console_suite
):
    """V7: a console link opened signed out redirects to the sign-in form (no 401, no
    error in the browser's console, a favicon), and signing in lands on the page the
    link asked for, with its query; the sign-in page signed in leads home."""
    suite = console_suite
    ctx = await browser.new_context(base_url=suite.url)
    page = await ctx.new_page()
    errors = _errors_of(page)
    response = await page.goto("/console/calls?status=completed")
    assert response is not None and response.status == 200
    assert "/console/sign-in?next=" in page.url
    await page.keyboard.type(suite.tokens["alice"])
    await page.keyboard.press("Enter")
    await expect(page.get_by_test_id("principal")).to_have_text("user:alice")
    assert page.url.endswith("/console/calls?status=completed")
    await expect(page.get_by_label("Status")).to_have_value("completed")
    await page.goto("/console/sign-in")
    await expect(page.get_by_role("heading", name="Conversations", exact=True)).to_be_visible()
    icon = await page.goto("/favicon.ico")
    assert icon is not None and icon.status == 200 and "svg" in icon.headers["content-type"]
    assert errors == []
    await ctx.close()


async def _transcript_has(suite: Any, conversation_id: str, kind: str) -> bool:
    page = await suite.tool(
        "owner", "transcript", {"conversation_id": conversation_id, "limit": 200}
    )
    return any(e.get("kind") == kind for e in page["items"])


async def test_a_call_from_a_conversation_links_both_ways_with_a_timeline_and_events_V7(
    browser, console_suite, screenshot
):
    """V7: the owner asks crew:demo for a report in a conversation; its agent calls
    `report` from there. The call's page links to its caller and target, shows the
    timeline with durations and, once completed, its events; times are relative with
    the local time as title; its id copies. The conversation links to the call and to
    the schedule the agent set on it; the list finds it by id and by target, and pages."""
    from agentworks.client import SchedulerClient

    suite = console_suite
    sent = await suite.tool(
        "owner", "messages", {"action": "send", "crew": "demo", "message": REPORT_ON + "uptime"}
    )
    conversation_id = sent["conversation_id"]
    await suite.tool("owner", "messages", {"action": "send", "crew": "demo", "message": "hi"})
    async with SchedulerClient(
        suite.scheduler_address, identity=suite.bot_scheduler_identity
    ) as agent:
        await agent.create_schedule(conversation_id, "weekly", interval_seconds=604800, name="wk")
    page = await signed_in(browser, suite, "owner")
    errors = _errors_of(page)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto(f"/console/conversations/{conversation_id}")
    transcript = page.get_by_role("list", name="Transcript")
    await expect(transcript).to_contain_text("calling report", timeout=WAIT_MS)
    found = re.search(r"calling report ([0-9a-f-]{36})", await transcript.inner_text())
    assert found is not None
    call_id = found[1]

    await page.goto(f"/console/calls/{call_id}")
    await expect(page.get_by_test_id("call-question")).to_have_text(QUESTION, timeout=WAIT_MS)
    caller = page.get_by_test_id("call-caller")
    await expect(caller).to_have_text("agent:demo/bot")
    assert "caller=agent%3Ademo%2Fbot" in (await caller.get_attribute("href") or "")
    timeline = page.get_by_test_id("call-timeline")
    await expect(timeline).to_contain_text("created")
    await expect(timeline).to_contain_text("looked the topic up")
    await page.get_by_label(re.compile("The call asks")).fill("PDF")
    await page.get_by_role("button", name="Answer").click()
    await expect(page.get_by_test_id("call-status")).to_have_text("completed", timeout=WAIT_MS)
    await expect(page.get_by_test_id("call-events")).to_contain_text("looked the topic up")
    await expect(timeline).to_contain_text("completed")
    await expect(page.get_by_test_id("call-duration")).to_have_text(re.compile(r"\d"))
    time = page.locator("#call-panel time[data-formatted]").first
    await expect(time).to_have_text(RELATIVE)
    assert (await time.get_attribute("title") or "").strip() != await time.get_attribute("datetime")
    await page.get_by_role("button", name=f"Copy call id {call_id}").click()
    assert await page.evaluate("navigator.clipboard.readText()") == call_id
    await screenshot(page, "call-timeline")

    await waiting.until(
        lambda: _transcript_has(suite, conversation_id, "function_completed"),
        what="the call's completion notice in the conversation",
    )
    await page.goto(f"/console/conversations/{conversation_id}")
    await expect(page.get_by_test_id("conversation-schedule")).to_contain_text("wk")
    await screenshot(page, "conversation-links")
    await page.get_by_test_id("conversation-calls").get_by_role("link").click()
    await expect(page.get_by_test_id("call-id")).to_contain_text(call_id)

    # The list: search by conversation id, by call id, by target; an unknown id; pages.
    for query, where in ((conversation_id, "/conversations/"), (call_id, "/calls/")):
        await page.goto("/console/conversations")
        await page.get_by_label("Search").fill(query)
        await page.get_by_role("button", name="Find").click()
        await expect(page).to_have_url(re.compile(where + query))
    await page.goto("/console/conversations")
    await page.get_by_label("Search").fill("00000000-0000-4000-8000-000000000000")
    await page.get_by_role("button", name="Find").click()
    await expect(page.get_by_test_id("search-missing")).to_be_visible()
    await page.get_by_label("Search").fill("demo")
    await page.get_by_role("button", name="Find").click()
    await expect(page.get_by_label("Target")).to_have_value("crew:demo")
    await screenshot(page, "conversations-search")
    await page.goto("/console/conversations?target=crew:demo&limit=1")
    first = await page.locator("tbody tr").inner_text()
    await page.get_by_role("link", name="Next page").click()
    await expect(page.get_by_role("link", name="First page")).to_be_visible()
    assert await page.locator("tbody tr").inner_text() != first
    assert "target=crew%3Ademo" in page.url and "limit=1" in page.url
    assert errors == []
    await page.context.close()


async def signed_in(browser: Any, suite: Any, who: str) -> Any:
    """A new browser context signed in as `who`."""
    ctx = await browser.new_context(base_url=suite.url)
    page = await ctx.new_page()
    await page.goto("/console/sign-in")
    await page.get_by_label("API token").fill(suite.tokens[who])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_test_id("principal")).to_be_visible()
    return page


async def test_a_question_with_choices_is_answered_with_a_button_and_timed_V7_F11(
    browser, console_suite, signing_keys, screenshot
):
    """V7 F11: a call's question that offers choices shows one button per choice in the
    reply form (no free text); clicking one posts it as the reply, which the runtime
    gets; the timeline has the claim, the question asked and its answer, each with its
    time and durations (no "time not recorded" once claimed)."""
    import asyncio

    from agentworks.client import FunctionsClient
    from agentworks.core.identity import Minter

    suite = console_suite
    await suite.tool(
        "ops", "targets", {"action": "register", "target": "crew:picker", "owner": "user:owner"}
    )
    await suite.tool("owner", "declarations", {
        "action": "declare", "target": "crew:picker", "name": "pick",
        "description": "Asks which format, offering choices.",
        "input_schema": {"type": "object"}, "allowed_callers": ["user:*"],
    })  # fmt: skip
    made = await suite.tool(
        "alice", "functions", {"action": "call", "crew": "picker", "function": "pick", "inputs": {}}
    )
    call_id = made["call_id"]
    bot = Minter("agent:picker/bot", signing_keys.ensure("gateway")[0])
    address = suite.gateway.gateway.config.functions_address
    async with FunctionsClient(address, identity=bot) as runtime:
        assert await runtime.claim_execution(["crew:picker"], wait_seconds=10) is not None
        asked = asyncio.create_task(
            runtime.ask_input(call_id, "fmt", "Which format?", choices=["PDF", "HTML"],
                              wait_seconds=25)
        )  # fmt: skip
        page = await signed_in(browser, suite, "alice")
        errors = _errors_of(page)
        await page.goto(f"/console/calls/{call_id}")
        await expect(page.get_by_test_id("call-question")).to_have_text(
            "Which format?", timeout=WAIT_MS
        )
        choices = page.get_by_test_id("call-choices").get_by_role("button")
        await expect(choices).to_have_text(["PDF", "HTML"])
        assert await page.locator("#reply-text").count() == 0
        timeline = page.get_by_test_id("call-timeline")
        await expect(timeline).to_contain_text("question asked")
        await expect(timeline).not_to_contain_text("time not recorded")
        await screenshot(page, "call-choices")
        await choices.filter(has_text="HTML").click()
        async with asyncio.timeout(20):
            assert (await asked).reply == "HTML"
        await runtime.finish_execution(call_id, final_message="made HTML")
    await expect(page.get_by_test_id("call-status")).to_have_text("completed", timeout=WAIT_MS)
    await page.reload()
    for step in ("claimed", "question asked", "answered", "completed"):
        await expect(timeline).to_contain_text(step)
    assert errors == []
    await page.context.close()
