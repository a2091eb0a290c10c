"""The web console in a real browser (V6): Debian's chromium under Playwright against a
real suite (`tests.fixtures.console`): sign-in and sign-out (V3), the owner's chat with
its crew while agent messaging is off and the reply arriving without a reload (V2, V4,
V5, C8), a call answered, completed and its file downloaded (V4, F7, F8, F11), a
schedule paused and resumed (V4, S4), one user seeing nothing of another's (A3), and
the attacker's side: other origins, missing CSRF tokens, replayed and revoked sessions
(V3), in the browser and over plain HTTP.

One suite and one browser for the module; each test opens its own browser context
(its own cookies). The screenshots in docs/console/ come from here (`make docs`).
"""

from __future__ import annotations

import asyncio
import pathlib
import re
from typing import Any

import pytest
from playwright.async_api import Page, expect

from tests.fixtures.console import QUESTION, REPORT_BYTES

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

WAIT_MS = 20_000


async def signed_in(browser: Any, suite: Any, who: str, **context: Any) -> Page:
    """A new browser context signed in as `who` with the keyboard only."""
    ctx = await browser.new_context(base_url=suite.url, **context)
    page = await ctx.new_page()
    await page.goto("/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.keyboard.type(suite.tokens[who])  # the token field has the focus
    await page.keyboard.press("Enter")
    await expect(page.get_by_test_id("principal")).to_have_text(
        {"owner": "user:owner", "alice": "user:alice", "bob": "user:bob", "ops": "user:ops"}[who]
    )
    return page


async def test_sign_in_sets_an_httponly_strict_cookie_and_sign_out_ends_the_session_V3(
    browser, console_suite, screenshot
):
    """V3: `/` leads to the sign-in form; a bad token is refused saying so; a good one
    gives an HttpOnly, SameSite=Strict session cookie (not the token); sign-out ends the
    session, so the old cookie replayed over plain HTTP is refused."""
    suite = console_suite
    ctx = await browser.new_context(base_url=suite.url, viewport={"width": 390, "height": 800})
    page = await ctx.new_page()
    await page.goto("/")
    assert page.url.endswith("/console/sign-in?next=%2Fconsole%2F")  # V7: no 401
    await screenshot(page, "sign-in-narrow")
    await page.get_by_label("API token").fill("aw_not-a-real-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("unknown API token")

    await page.get_by_label("API token").fill(suite.tokens["alice"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_test_id("principal")).to_have_text("user:alice")
    (cookie,) = [c for c in await ctx.cookies() if c["name"] == "aw_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert suite.tokens["alice"] not in cookie["value"]
    assert await page.evaluate("document.cookie") == ""  # no script can read it

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    replay = await suite.http.get(
        "/console/conversations", headers={"Cookie": f"aw_console={cookie['value']}"}
    )
    assert replay.status_code == 401 and "session has ended" in replay.text
    await ctx.close()


async def test_the_owner_chats_while_messaging_is_off_and_replies_arrive_live_V2_V4_V5_C8(
    browser, console_suite, screenshot
):
    """V5, C8: with crew:demo's agent messaging off, a programmatic send is refused, but
    the owner's chat in the console gets through; V2, V4: the agent's reply shows up in
    the open transcript without a reload, with the deliveries, both ways."""
    suite = console_suite
    page = await signed_in(browser, suite, "owner")
    try:
        await page.get_by_role("link", name="Targets").click()
        await page.get_by_role("button", name="Turn agent messaging off").click()
        await expect(page.get_by_test_id("messaging")).to_have_text("off")
        await screenshot(page, "targets-messaging-off")
        refused = await suite.tool(
            "owner", "messages", {"action": "send", "crew": "demo", "message": "hi"}, status=409
        )
        assert "free_text_ask" in refused["error"]["message"]

        await page.get_by_role("link", name="Conversations").click()
        await page.get_by_label("Crew or workflow").fill("crew:demo")
        await page.get_by_label("Message").fill("status report, please")
        await page.get_by_role("button", name="Send").click()
        await expect(
            page.get_by_role("heading", name="Conversation with crew:demo")
        ).to_be_visible()
        transcript = page.get_by_role("list", name="Transcript")
        await page.evaluate("window.notReloaded = true")
        await expect(transcript).to_contain_text("echo: status report, please", timeout=WAIT_MS)

        await page.get_by_label("Your message").fill("thanks")
        await page.get_by_role("button", name="Send").click()
        await expect(transcript).to_contain_text("echo: thanks", timeout=WAIT_MS)
        assert await page.evaluate("window.notReloaded") is True  # it came without a reload
        await expect(page.get_by_label("Your message")).to_have_value("")
        assert await transcript.get_by_test_id("delivery").count() >= 2
        await screenshot(page, "conversation")
        await page.get_by_role("link", name="Conversations").click()
        await expect(page.get_by_role("link", name="crew:demo").first).to_be_visible()
        await page.context.close()
    finally:
        await suite.tool(
            "owner", "targets", {"action": "update", "target": "crew:demo", "free_text_ask": True}
        )


async def test_a_call_is_answered_completes_live_and_its_files_download_V4_F7_F8_F11(
    browser, console_suite, screenshot
):
    """V4, F11: alice calls `report` from the targets page (its schema and slots shown),
    the call asks a question, she answers it, the status turns completed without a
    reload (F7); the text file is shown and the binary one downloads byte for byte (F8)."""
    suite = console_suite
    page = await signed_in(browser, suite, "alice")
    await page.get_by_role("link", name="Targets").click()
    await expect(page.get_by_test_id("slots").first).to_contain_text("free")
    await page.get_by_text("report", exact=True).click()  # opens the function's details
    await expect(page.get_by_text('"topic"').first).to_be_visible()
    await page.get_by_label("Inputs of report (JSON)").fill('{"topic": "uptime"}')
    await screenshot(page, "targets")
    await page.get_by_role("button", name="Call report").click()

    await expect(page.get_by_test_id("call-question")).to_have_text(QUESTION, timeout=WAIT_MS)
    await expect(page.get_by_test_id("call-status")).to_have_text("waiting for input")
    await screenshot(page, "call-question")
    await page.get_by_label(re.compile("The call asks")).fill("PDF")
    await page.get_by_role("button", name="Answer").click()
    await expect(page.get_by_test_id("call-status")).to_have_text("completed", timeout=WAIT_MS)
    await expect(page.get_by_test_id("call-answer")).to_have_text("report done as PDF")
    await screenshot(page, "call-completed")

    async with page.expect_download() as info:
        await page.get_by_role("link", name="download report.bin").click()
    download = await info.value
    saved = await download.path()
    assert await asyncio.to_thread(pathlib.Path(saved).read_bytes) == REPORT_BYTES

    await page.get_by_role("link", name="view").click()
    await expect(page.get_by_test_id("file-text")).to_have_text("format: PDF")
    await page.get_by_role("link", name="Calls").click()
    await expect(page.get_by_role("cell", name="completed").first).to_be_visible()
    await page.context.close()


async def test_the_operator_pauses_and_resumes_a_schedule_and_all_timers_V4_S3_S4(
    browser, console_suite, screenshot
):
    """V4, S4: the operator sees a schedule of the crew's and pauses and resumes it; S3:
    pauses all timers and lifts the pause again; V1 A3: the crew's owner sees the
    schedule, with no button to change it, and a second user sees none."""
    from agentworks.client import SchedulerClient

    suite = console_suite
    sent = await suite.tool("alice", "messages", {"action": "send", "crew": "demo", "message": "x"})
    async with SchedulerClient(
        suite.scheduler_address, identity=suite.bot_scheduler_identity
    ) as agent:
        await agent.create_schedule(
            sent["conversation_id"], "daily digest", interval_seconds=86400, name="digest"
        )
    page = await signed_in(browser, suite, "ops")
    await page.get_by_role("link", name="Timers").click()
    row = page.get_by_test_id("schedule").filter(has_text="digest")
    await expect(row.get_by_test_id("schedule-state")).to_have_text("active")
    await row.get_by_role("button", name="Pause schedule digest").click()
    await expect(row.get_by_test_id("schedule-state")).to_have_text("paused")
    await row.get_by_role("button", name="Resume schedule digest").click()
    await expect(row.get_by_test_id("schedule-state")).to_have_text("active")

    await page.get_by_label("Reason").fill("maintenance")
    await page.get_by_role("button", name="Pause", exact=True).click()
    await expect(page.get_by_test_id("pause")).to_contain_text("maintenance")
    await screenshot(page, "timers")
    await page.get_by_role("button", name="Resume", exact=True).click()
    await expect(page.get_by_test_id("no-pauses")).to_be_visible()
    await page.context.close()

    # V1 A3: crew:demo's owner sees its agent's schedule but is offered no button to
    # change it; bob sees none.
    page = await signed_in(browser, suite, "owner")
    await page.get_by_role("link", name="Timers").click()
    row = page.get_by_test_id("schedule").filter(has_text="digest")
    await expect(row.get_by_test_id("schedule-state")).to_have_text("active")
    await expect(row.get_by_role("button")).to_have_count(0)
    await page.context.close()
    page = await signed_in(browser, suite, "bob")
    await page.get_by_role("link", name="Timers").click()
    await expect(page.get_by_text("No schedules you may see.")).to_be_visible()
    await page.context.close()


async def test_a_second_user_sees_none_of_the_first_users_conversations_or_calls_A3_V4(
    browser, console_suite
):
    """A3, V4: bob's console lists none of alice's conversations or calls, and alice's
    conversation and call opened by their ids are not found."""
    suite = console_suite
    sent = await suite.tool(
        "alice", "messages", {"action": "send", "crew": "demo", "message": "secret plan"}
    )
    called = await suite.tool(
        "alice",
        "functions",
        {"action": "call", "crew": "demo", "function": "report", "inputs": {"topic": "secret"}},
    )
    page = await signed_in(browser, suite, "bob")
    await page.get_by_role("link", name="Conversations").click()
    await expect(page.get_by_text("No conversations yet.")).to_be_visible()
    await expect(page.get_by_text("secret plan")).to_have_count(0)
    await page.get_by_role("link", name="Calls").click()
    await expect(page.get_by_text("No calls")).to_be_visible()

    response = await page.goto(f"/console/conversations/{sent['conversation_id']}")
    assert response is not None and response.status == 404
    await expect(page.get_by_role("alert")).to_contain_text("NOT_FOUND")
    response = await page.goto(f"/console/calls/{called['call_id']}")
    assert response is not None and response.status == 404
    await expect(page.get_by_text("secret plan")).to_have_count(0)
    await suite.tool("alice", "functions", {"action": "cancel", "call_id": called["call_id"]})
    await page.context.close()


async def _conversation_count(suite: Any, who: str) -> int:
    page = await suite.tool(who, "list", {"what": "conversations", "limit": 200})
    return len(page["items"])


async def test_another_sites_page_cannot_act_in_the_console_V3(browser, console_suite):
    """V3, the attacker in the browser: a page on another site that posts a chat form to
    the console gets no session cookie (SameSite=Strict) and is refused; nothing is
    sent."""
    suite = console_suite
    page = await signed_in(browser, suite, "alice")
    before = await _conversation_count(suite, "alice")
    attack = (
        f'<form id="f" method="post" action="{suite.url}/console/chat">'
        '<input name="target" value="crew:demo"><input name="message" value="pwned">'
        "</form><script>document.getElementById('f').submit()</script>"
    )

    async def evil(route: Any) -> None:
        await route.fulfill(status=200, content_type="text/html", body=attack)

    await page.route("http://evil.example/**", evil)
    async with page.expect_response(f"{suite.url}/console/chat") as info:
        await page.goto("http://evil.example/attack")
    response = await info.value
    assert response.status in (401, 403)
    assert await _conversation_count(suite, "alice") == before
    await page.context.close()


async def test_state_changes_need_the_consoles_origin_and_the_csrf_token_V3(console_suite):
    """V3, the attacker over plain HTTP with a valid session cookie: a POST without an
    Origin, from another origin, without the CSRF token or with a wrong one is refused
    with 403 and changes nothing; sign-in from another origin is refused too; the same
    request with the console's Origin and its token goes through."""
    suite = console_suite
    http = suite.http
    own = suite.url
    refused = await http.post(
        "/console/sign-in",
        data={"token": suite.tokens["alice"]},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403 and "origin" in refused.text
    assert "set-cookie" not in refused.headers
    signed = await http.post(
        "/console/sign-in", data={"token": suite.tokens["alice"]}, headers={"Origin": own}
    )
    assert signed.status_code == 303
    cookie = f"aw_console={signed.cookies['aw_console']}"
    http.cookies.clear()
    page = await http.get("/console/conversations", headers={"Cookie": cookie})
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    before = await _conversation_count(suite, "alice")
    chat = {"target": "crew:demo", "message": "forged"}

    for headers, form, why in [
        ({}, {**chat, "csrf": csrf[1]}, "no Origin header"),
        ({"Origin": "http://evil.example"}, {**chat, "csrf": csrf[1]}, "origin"),
        ({"Origin": "null"}, {**chat, "csrf": csrf[1]}, "origin"),
        ({"Origin": own}, chat, "CSRF token"),
        ({"Origin": own}, {**chat, "csrf": "guessed"}, "CSRF token"),
        ({"Origin": own, "X-CSRF-Token": "guessed"}, chat, "CSRF token"),
    ]:
        response = await http.post(
            "/console/chat", data=form, headers={**headers, "Cookie": cookie}
        )
        assert response.status_code == 403, (why, response.status_code)
        assert why in response.text, why
    assert await _conversation_count(suite, "alice") == before

    ok = await http.post(
        "/console/chat", data={**chat, "csrf": csrf[1]}, headers={"Origin": own, "Cookie": cookie}
    )
    assert ok.status_code == 303, ok.text
    assert await _conversation_count(suite, "alice") == before + 1


async def test_a_revoked_token_ends_its_console_sessions_V3_A1(browser, console_suite):
    """V3, A1: revoking the token a session was signed in with ends the session on the
    next request; the page says so and asks to sign in again."""
    suite = console_suite
    created = await suite.tool("ops", "tokens", {"action": "create", "principal": "user:carol"})
    suite.tokens["carol"] = created["token"]
    ctx = await browser.new_context(base_url=suite.url)
    page = await ctx.new_page()
    await page.goto("/console/sign-in")
    await page.get_by_label("API token").fill(created["token"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_test_id("principal")).to_have_text("user:carol")
    await suite.tool("ops", "tokens", {"action": "revoke", "token_id": created["token_id"]})
    await page.get_by_role("link", name="Calls").click()
    await expect(page.get_by_role("alert")).to_contain_text("was revoked")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await ctx.close()


async def test_bad_console_input_is_refused_saying_what_was_wrong_and_stores_nothing_P6_V4(
    console_suite,
):
    """P6, V4: a chat to something that is not a target, function inputs that are not
    JSON or break the schema, and an empty message get a page naming the fault (400),
    and nothing is sent or called."""
    suite = console_suite
    http, own = suite.http, suite.url
    signed = await http.post(
        "/console/sign-in", data={"token": suite.tokens["bob"]}, headers={"Origin": own}
    )
    cookie = f"aw_console={signed.cookies['aw_console']}"
    http.cookies.clear()
    page = await http.get("/console/calls", headers={"Cookie": cookie})
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    headers = {"Origin": own, "Cookie": cookie}
    conversations = await _conversation_count(suite, "bob")
    calls = len((await suite.tool("bob", "list", {"what": "calls"}))["items"])
    for path, form, words in [
        ("/console/chat", {"target": "team:x", "message": "hi"}, "not a crew or workflow"),
        ("/console/chat", {"target": "crew:demo", "message": ""}, "empty"),
        (
            "/console/targets/call",
            {"target": "crew:demo", "function": "report", "inputs": "{not json"},
            "not JSON",
        ),
        (
            "/console/targets/call",
            {"target": "crew:demo", "function": "report", "inputs": '{"topic": 7}'},
            "topic",
        ),
    ]:
        response = await http.post(path, data={**form, "csrf": csrf[1]}, headers=headers)
        assert response.status_code == 400, (form, response.status_code, response.text[-300:])
        assert words in response.text, (words, response.text[-500:])
    assert await _conversation_count(suite, "bob") == conversations
    assert len((await suite.tool("bob", "list", {"what": "calls"}))["items"]) == calls
