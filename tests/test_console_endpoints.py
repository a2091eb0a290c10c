"""The console's Endpoints page (N2, N4, V4), in a real browser (Debian's chromium under
Playwright) against the real suite of `tests.fixtures.console`: alice registers a webhook
endpoint for her conversation's inbox in the page, is shown its secret once, sees the
reply that follows delivered to a local receiver (signed with that secret) and listed
with its status, and deletes the endpoint, with no error in the browser's console.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from standardwebhooks import Webhook

from agentworks.server.testing import waiting
from tests.fixtures.webhook_receiver import Receiver

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

WAIT_MS = 20_000


def _errors_of(page: Any) -> list[str]:
    """The browser console's errors and the failed responses of a page, as they come."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: seen.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return seen


async def test_an_endpoint_is_registered_shows_its_delivery_and_is_deleted_in_the_page_N2_V4(
    browser, console_suite, screenshot
):
    """N2 V4: on /console/endpoints a private address is refused above the form as
    filled in; alice registers her conversation's inbox to a local receiver; the page
    shows the secret once and the endpoint with no delivery yet. The
    agent's next reply reaches the receiver, verified with that secret (Standard
    Webhooks), and the page lists the delivery under its webhook-id as delivered. Delete
    removes the endpoint; the `endpoints` tool agrees."""
    suite = console_suite
    receiver = await Receiver().start()
    try:
        sent = await suite.tool(
            "alice", "messages", {"action": "send", "crew": "demo", "message": "before"}
        )
        inbox_id = sent["inbox_id"]
        ctx = await browser.new_context(base_url=suite.url)
        page = await ctx.new_page()
        errors = _errors_of(page)
        await page.goto("/console/endpoints")
        await page.keyboard.type(suite.tokens["alice"])
        await page.keyboard.press("Enter")
        await expect(page.get_by_test_id("no-endpoints")).to_be_visible()

        # An address the operator's policy does not allow: refused above the form, the
        # form as filled in, nothing registered.
        form = page.get_by_role("form", name="Register an endpoint")
        await form.get_by_label("URL").fill("http://10.1.2.3/hook")
        await form.get_by_label("Inbox").fill(inbox_id)
        await form.get_by_label("Description").fill("my receiver")
        await form.get_by_role("button", name="Register").click()
        await expect(page.get_by_test_id("refused")).to_contain_text("INVALID_ARGUMENT")
        await expect(form.get_by_label("URL")).to_have_value("http://10.1.2.3/hook")
        await expect(page.get_by_test_id("no-endpoints")).to_be_visible()
        assert all("400" in e for e in errors), errors  # the refusal's own status
        errors.clear()

        await form.get_by_label("URL").fill(receiver.url)
        await form.get_by_role("button", name="Register").click()
        secret = (await page.get_by_test_id("secret").inner_text()).strip()
        assert secret.startswith("whsec_"), secret
        endpoint = page.get_by_test_id("endpoint")
        await expect(endpoint).to_have_count(1)
        await expect(endpoint).to_contain_text(receiver.url)
        await expect(endpoint).to_contain_text(f"inbox:{inbox_id}")
        await expect(endpoint).to_contain_text("No deliveries yet.")

        await suite.tool(
            "alice", "messages", {"action": "send", "inbox_id": inbox_id, "message": "after"}
        )
        (received,) = await receiver.wait_for(1)
        event = Webhook(secret).verify(received.body, received.headers)
        assert event["type"] == "message.created", event
        assert event["data"]["text"] == "echo: after", event
        delivery_id = received.headers["webhook-id"]

        async def shown_delivered() -> bool:
            await page.reload()
            status = page.get_by_test_id("delivery-status")
            return await status.count() == 1 and await status.inner_text() == "delivered"

        await waiting.until(shown_delivered, timeout=15, what="the delivery shown delivered")
        await expect(page.get_by_test_id("delivery")).to_contain_text(delivery_id)
        await screenshot(page, "endpoints")

        await page.get_by_role("button", name="Delete endpoint my receiver").click()
        await expect(page.get_by_test_id("no-endpoints")).to_be_visible(timeout=WAIT_MS)
        listed = await suite.tool("alice", "endpoints", {"action": "list"})
        assert listed["endpoints"] == []
        assert errors == []
        await ctx.close()
    finally:
        await receiver.stop()
