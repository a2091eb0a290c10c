"""A failed turn tells its owner why (L12): the SDK's TurnWorker completes a turn whose
handler raised with the exception, or the handler's own detail, cut to CompleteTurn's
4 KiB keeping its end; against a real messaging service."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentworks.client import MessagingClient
from agentworks.core.limits import MAX_TURN_ERROR_BYTES
from agentworks.runtime import TurnContext, TurnOutcome, TurnWorker
from agentworks.runtime.reporting import fit_tail

CREW = "crew:demo"
AGENT = "agent:demo/demo-bot"
WAIT = 15


@pytest.fixture
async def owner(messaging, identity) -> AsyncIterator[MessagingClient]:
    """The owner of crew:demo (registered by the operator)."""
    async with MessagingClient(messaging.address, identity=identity("user:ops", {"operator"})) as o:
        await o.register_target(CREW, owner="user:owner")
    async with MessagingClient(messaging.address, identity=identity("user:owner")) as client:
        yield client


async def handled(messaging, identity, handler, texts: list[str]) -> list[str]:
    """Serve one turn per text (each in its own conversation of alice's) with `handler`;
    the turn errors the owner reads, in order."""
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    worker = TurnWorker(
        messaging.address,
        identity(AGENT),
        [CREW],
        handler,
        wait_seconds=2,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    conversations = []
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as alice:
        for text in texts:
            conversations.append((await alice.send(text, target=CREW)).conversation_id)
            assert (await asyncio.wait_for(outcomes.get(), WAIT)).error is not None
        seen_by_alice = [await alice.get_transcript(c) for c in conversations]
    worker.stop()
    await asyncio.wait_for(task, WAIT)
    for page in seen_by_alice:  # A3: never the caller's to read
        assert [e.delivery.turn_error for e in page.entries if e.HasField("delivery")] == [""]
    async with MessagingClient(messaging.address, identity=identity("user:owner")) as owner:
        pages = [await owner.get_transcript(c) for c in conversations]
    return [e.delivery.turn_error for p in pages for e in p.entries if e.HasField("delivery")]


async def test_a_raising_handlers_exception_or_detail_is_the_turns_error_L12(
    owner, messaging, identity
):
    """L12: a handler that raises completes its turn with `Type: message`; one that set
    `TurnContext.error_detail` with that instead, its end kept when over 4 KiB, NUL
    characters made sendable."""

    async def handler(ctx: TurnContext) -> None:
        text = ctx.messages[0].text
        if text == "detail":
            ctx.error_detail = (
                "head line\n" + "".join(f"line {n}\n" for n in range(2000)) + "\x00end"
            )
        raise RuntimeError(f"could not handle {text!r}")

    errors = await handled(messaging, identity, handler, ["plain", "detail"])
    assert errors[0] == "RuntimeError: could not handle 'plain'"
    detail = errors[1]
    assert len(detail.encode()) <= MAX_TURN_ERROR_BYTES
    assert detail.startswith("head line\n[... cut: ")
    assert detail.endswith("line 1999\n\ufffdend")
    assert "\nline 1998\n" in detail and "line 5\n" not in detail


def test_fit_tail_keeps_short_text_and_the_end_of_long_text_L12():
    """L12: text within the limit is kept as it is; longer text keeps its first line,
    says how much there was, and keeps whole lines of its end; one long line its end."""
    assert fit_tail("short\ntail", 100) == "short\ntail"
    cut = fit_tail("status 1\n" + "x" * 50 + "\nlast", 40)
    assert cut.startswith("status 1\n[... cut: 64 bytes in all]\n") and cut.endswith("last")
    assert len(cut.encode()) <= 40
    one = fit_tail("é" * 100, 60)
    assert one.startswith("[... cut: 200 bytes in all]\n") and set(one.split("\n")[1]) == {"é"}
    assert len(one.encode()) <= 60
