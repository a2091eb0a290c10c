"""A failed turn's error (L12): CompleteTurn's `error` is kept on the turn and shown on
its deliveries in the transcript to the target's owner and the operator, never to the
conversation's outside caller or the crew's agents (A3)."""

from __future__ import annotations

import pytest

from agentworks.core.errors import InvalidArgument, Reason
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.proto_limits import MESSAGING_COMPLETE_TURN_REQUEST_ERROR_MAX_BYTES

TAIL = "Traceback (most recent call last):\n  boom\nRuntimeError: the crew's secret detail"


def turn_errors(page: pb.GetTranscriptResponse) -> list[str]:
    return [e.delivery.turn_error for e in page.entries if e.WhichOneof("entry") == "delivery"]


async def test_a_failed_turns_error_is_read_by_the_owner_and_operator_only_L12_A3(
    clients, demo, operator
):
    """L12 A3: the runtime completes a turn with its error; the target's owner and the
    operator read it on the turn's delivery, the caller and the crew's agent read the
    same transcript without it; a turn completed without one shows none."""
    alice = await clients("user:alice")
    owner = await clients("user:owner")
    bot = await clients("agent:demo/bot")
    receipt = await alice.send("please fail", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None
    await bot.complete_turn(turn.turn_id, error=TAIL)
    await bot.complete_turn(turn.turn_id, error=TAIL)  # a retry is answered alike
    await alice.send("and now succeed", inbox_id=receipt.inbox_id)
    second = await bot.claim_turn([demo], wait_seconds=5)
    assert second is not None
    await bot.complete_turn(second.turn_id)

    for reader in (owner, operator):
        page = await reader.get_transcript(receipt.conversation_id)
        assert turn_errors(page) == [TAIL, ""]
    for reader in (alice, bot):
        page = await reader.get_transcript(receipt.conversation_id)
        assert turn_errors(page) == ["", ""]
        assert [e.delivery.status for e in page.entries if e.HasField("delivery")] == [
            pb.DELIVERY_STATUS_HANDLED,
            pb.DELIVERY_STATUS_HANDLED,
        ]
    by_inbox = await alice.get_transcript(inbox_id=receipt.inbox_id)
    assert turn_errors(by_inbox) == ["", ""]


async def test_an_error_over_4_kib_or_with_nul_is_refused_L12(clients, demo):
    """L12: the error is at most 4 KiB (the proto's rule, FIELD_RULE naming `error`);
    a NUL is refused; the turn stays the runtime's to complete."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    await alice.send("hi", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None
    over = "x" * (MESSAGING_COMPLETE_TURN_REQUEST_ERROR_MAX_BYTES + 1)
    for error in (over, "é" * 2049, "x" * 5 * 1024):
        with pytest.raises(InvalidArgument) as refused:
            await bot.complete_turn(turn.turn_id, error=error)
        assert refused.value.reason == Reason.FIELD_RULE
        assert refused.value.metadata.get("field") == "error"
    with pytest.raises(InvalidArgument):
        await bot.complete_turn(turn.turn_id, error="a\x00b")
    await bot.complete_turn(
        turn.turn_id, error="x" * MESSAGING_COMPLETE_TURN_REQUEST_ERROR_MAX_BYTES
    )
