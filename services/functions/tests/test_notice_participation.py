"""Completion notices go only to conversations the caller takes part in (L6, F13, T3).

The functions service knows participation from the turn capability alone: messaging
signs it for the runtime that claimed a turn, and it names that turn's conversation. A
call asking for a notice must carry such a capability, for that conversation; anything
else is refused before a call exists.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from agentworks.core import errors


async def calls_stored(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (await conn.execute("SELECT count(*) FROM functions.calls")).fetchone()
    assert row is not None
    return row[0]


async def test_a_notice_aimed_at_a_conversation_the_caller_is_not_in_is_refused_L6_F13(
    clients, echo, turn_caller, database_url
):
    """L6 (attacker): agent:alpha/scout asks for the completion notice of its call in a
    conversation it takes no part in: with its runtime identity (no turn capability:
    it could name any conversation id), and with the capability of a turn of its own
    conversation naming another. Both are PERMISSION_DENIED saying why, and no call is
    created. From the turn of that conversation, with its capability, the same call
    is accepted."""
    mine, foreign = str(uuid.uuid4()), str(uuid.uuid4())
    scout = await clients("agent:alpha/scout")
    in_turn = turn_caller("agent:alpha/scout", mine)

    with pytest.raises(errors.PermissionDenied) as refused:
        await scout.call("crew:demo", echo, {"text": "hi"}, notify_conversation_id=foreign)
    assert "go only to a conversation the caller takes part in" in refused.value.message
    assert "No call was created" in refused.value.message
    with pytest.raises(errors.PermissionDenied, match="acts for that conversation only"):
        await in_turn.call("crew:demo", echo, {"text": "hi"}, notify_conversation_id=foreign)
    # A retry key changes nothing: still refused, still nothing stored.
    with pytest.raises(errors.PermissionDenied):
        await scout.call(
            "crew:demo",
            echo,
            {"text": "hi"},
            notify_conversation_id=foreign,
            submission_id="again",
        )
    assert await calls_stored(database_url) == 0

    receipt = await in_turn.call("crew:demo", echo, {"text": "hi"}, notify_conversation_id=mine)
    assert receipt.created
    status = await scout.get_status(receipt.call_id)
    assert status.caller == "agent:alpha/scout"
    assert await calls_stored(database_url) == 1
    # Without a notice the agent's own identity still calls (and polls status).
    assert (await scout.call("crew:demo", echo, {"text": "poll me"})).created
