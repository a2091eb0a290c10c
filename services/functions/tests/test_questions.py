"""A call's questions in its status: choices, ask ids and times (F11, V7, M2)."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from agentworks.client.functions import state_name
from agentworks.core import errors, limits
from agentworks.core.errors import Reason


def _stored_questions(database_url: str, call_id: str) -> list[tuple[str, list[str], str | None]]:
    with psycopg.connect(database_url) as db:
        rows = db.execute(
            "SELECT ask_id, choices, reply FROM functions.questions WHERE call_id = %s "
            "ORDER BY seq",
            (call_id,),
        ).fetchall()
    return [(r[0], list(r[1]), r[2]) for r in rows]


async def test_a_question_offers_choices_and_a_reply_must_be_one_of_them_F11_M2_V7(
    clients, echo, runtime, database_url
):
    """F11 M2 V7: a question asked with choices shows in the status as the pending
    question (ask id, text, choices, asked_at) beside the call's claimed_at and
    updated_at; a reply that is none of them is refused (INVALID_ARGUMENT, NOT_A_CHOICE,
    the choices in its metadata) and stores nothing; one of them answers it, and the
    status then keeps the question with its answered_at and no pending question."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "x"})).call_id
    fresh = await alice.get_status(call_id)
    assert not fresh.HasField("claimed_at") and fresh.HasField("updated_at")
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    choices = ["red", "green", "blue ✓"]
    await runtime.ask_input(call_id, "colour", "Which colour?", choices=choices)

    status = await alice.get_status(call_id)
    assert state_name(status.status) == "waiting_for_input"
    pending = status.pending_question
    assert (pending.ask_id, pending.text, list(pending.choices)) == (
        "colour",
        "Which colour?",
        choices,
    )
    assert status.question == "Which colour?"  # the plain text, for older readers
    assert pending.HasField("asked_at") and not pending.HasField("answered_at")
    claimed = status.claimed_at.ToDatetime()
    asked = pending.asked_at.ToDatetime()
    assert status.created_at.ToDatetime() <= claimed <= asked <= status.updated_at.ToDatetime()
    assert status.updated_at.ToDatetime() > fresh.updated_at.ToDatetime()
    assert [q.ask_id for q in status.questions] == ["colour"]

    with pytest.raises(errors.InvalidArgument, match="not one of the question's choices") as no:
        await alice.reply(call_id, "purple")
    assert no.value.reason == Reason.NOT_A_CHOICE
    assert json.loads(no.value.metadata["choices"]) == choices
    assert no.value.metadata["call_id"] == call_id
    with pytest.raises(errors.InvalidArgument, match="not one of") as near:
        await alice.reply(call_id, "Red")  # as written: no case folding
    assert near.value.reason == Reason.NOT_A_CHOICE
    after = await alice.get_status(call_id)
    assert (state_name(after.status), after.version) == ("waiting_for_input", status.version)
    assert _stored_questions(database_url, call_id) == [("colour", choices, None)]

    waiting = asyncio.create_task(
        runtime.ask_input(call_id, "colour", "Which colour?", wait_seconds=20)
    )
    answered = await alice.reply(call_id, "blue ✓")
    assert (await asyncio.wait_for(waiting, 10)).reply == "blue ✓"
    assert state_name(answered.status) == "running"
    assert not answered.HasField("pending_question") and answered.question == ""
    (record,) = answered.questions
    assert (record.ask_id, list(record.choices)) == ("colour", choices)
    assert record.asked_at.ToDatetime() <= record.answered_at.ToDatetime()
    assert answered.updated_at.ToDatetime() >= record.answered_at.ToDatetime()


async def test_a_question_without_choices_takes_any_text_and_an_ask_again_keeps_its_choices_F11(
    clients, echo, runtime, database_url
):
    """F11: a question without choices takes any reply; asking again with the same ask id
    (a runtime's retry) keeps the first ask's choices; the history lists both questions,
    oldest first, the withdrawn one with its withdrawn_at."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "x"})).call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.ask_input(call_id, "first", "Ship it?", choices=["yes", "no"])
    await runtime.ask_input(call_id, "first", "Ship it?", choices=["maybe"])
    assert list((await alice.get_status(call_id)).pending_question.choices) == ["yes", "no"]
    await runtime.ask_input(call_id, "first", "", withdraw=True)
    await runtime.ask_input(call_id, "second", "Anything to add?")
    await alice.reply(call_id, "free text, any words")
    status = await alice.get_status(call_id)
    assert [(q.ask_id, list(q.choices)) for q in status.questions] == [
        ("first", ["yes", "no"]),
        ("second", []),
    ]
    first, second = status.questions
    assert first.HasField("withdrawn_at") and not first.HasField("answered_at")
    assert second.HasField("answered_at") and not second.HasField("withdrawn_at")
    assert _stored_questions(database_url, call_id)[1] == ("second", [], "free text, any words")


@pytest.mark.parametrize(
    ("choices", "rule"),
    [
        ([f"c{i}" for i in range(limits.MAX_CHOICES + 1)], "repeated.max_items"),
        (["same", "same"], "repeated.unique"),
        (["x" * (limits.MAX_CHOICE_CHARS + 1)], "string.max_len"),
        ([""], "string.min_len"),
    ],
)
async def test_bad_choices_are_refused_by_their_proto_rule_and_nothing_is_asked_F11_P6(
    clients, echo, runtime, database_url, choices, rule
):
    """F11 P6: more than 20 choices, two the same, one past 200 characters or an empty
    one is refused (INVALID_ARGUMENT, FIELD_RULE naming the rule); the call stays
    running with no question stored."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "x"})).call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    with pytest.raises(errors.InvalidArgument) as refused:
        await runtime.ask_input(call_id, "q", "Pick one", choices=choices)
    assert refused.value.reason == Reason.FIELD_RULE
    assert refused.value.metadata["rule"] == rule
    assert refused.value.metadata["field"].startswith("choices")
    status = await alice.get_status(call_id)
    assert (state_name(status.status), len(status.questions)) == ("running", 0)
    assert _stored_questions(database_url, call_id) == []


async def test_watch_call_sends_the_pending_question_with_its_choices_N1_F11(
    clients, echo, runtime
):
    """N1 F11: WatchCall's statuses carry the pending question with its choices."""
    alice = await clients("user:alice")
    call_id = (await alice.call("crew:demo", echo, {"text": "x"})).call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    changes = alice.watch_call(call_id)
    try:
        first = await anext(changes)
        assert not first.status.HasField("pending_question")
        await runtime.ask_input(call_id, "q", "Pick one", choices=["a", "b"])
        while True:
            change = await asyncio.wait_for(anext(changes), 10)
            if change.status.HasField("pending_question"):
                break
        assert list(change.status.pending_question.choices) == ["a", "b"]
        assert change.status.HasField("claimed_at")
    finally:
        await changes.aclose()  # type: ignore[attr-defined]
