"""Listing calls and targets over gRPC (V1, A3): keyset pages, filters, who sees what."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentworks.client.common import target_str
from agentworks.client.functions import state_name
from agentworks.core import errors


async def _all_calls(client, **filters) -> list:
    """Every page of a call listing, two at a time."""
    calls, cursor = [], ""
    while True:
        page = await client.list_calls(after=cursor, limit=2, **filters)
        calls.extend(page.calls)
        cursor = page.next_cursor
        if not cursor:
            return calls


async def test_calls_are_listed_newest_first_across_pages_with_filters_V1(clients, echo, owner):
    """V1: calls come newest first, page by page through an opaque cursor (a page
    boundary crossed without a repeat or a gap), and filter by target, caller, status
    and created time."""
    alice = await clients("user:alice")
    bob = await clients("user:bob")
    made = []
    for n in range(3):
        made.append((await alice.call("crew:demo", echo, {"text": f"a{n}"})).call_id)
    made.append((await bob.call("crew:demo", echo, {"text": "b"})).call_id)
    await alice.cancel(made[0])

    mine = await _all_calls(alice)
    assert [c.call_id for c in mine] == made[2::-1]  # alice's own, newest first
    first = mine[-1]
    assert target_str(first.target) == "crew:demo" and first.function == "echo"
    assert first.caller == "user:alice" and state_name(first.status) == "cancelled"
    assert first.created_at.seconds and first.ended_at.seconds
    assert not mine[0].ended_at.seconds  # still open

    page = await alice.list_calls(limit=2)
    assert len(page.calls) == 2 and page.next_cursor
    rest = await alice.list_calls(limit=2, after=page.next_cursor)
    assert [c.call_id for c in rest.calls] == [made[0]] and rest.next_cursor == ""

    everyone = await _all_calls(owner)  # the owner of crew:demo sees every call on it
    assert [c.call_id for c in everyone] == made[::-1]
    by_bob = await _all_calls(owner, caller="user:bob")
    assert [c.call_id for c in by_bob] == [made[3]]
    open_ = await _all_calls(owner, statuses=["running", "waiting_for_input"])
    assert [c.call_id for c in open_] == made[:0:-1]
    cancelled = await _all_calls(owner, statuses=["cancelled"], target="crew:demo")
    assert [c.call_id for c in cancelled] == [made[0]]
    now = datetime.now(UTC)
    assert await _all_calls(owner, created_after=now + timedelta(minutes=1)) == []
    assert len(await _all_calls(owner, created_before=now + timedelta(minutes=1))) == 4
    assert await _all_calls(owner, created_before=now - timedelta(hours=1)) == []


async def test_a_second_user_sees_none_of_the_first_users_calls_and_the_operator_all_A3_V1(
    clients, echo, operator, owner
):
    """A3 V1: a caller lists only their own calls (even filtering by another caller or
    the target), the target's owner every call on it, the operator every call."""
    alice = await clients("user:alice")
    mallory = await clients("user:mallory")
    call = await alice.call("crew:demo", echo, {"text": "secret"})
    assert list((await mallory.list_calls()).calls) == []
    assert list((await mallory.list_calls(caller="user:alice")).calls) == []
    assert list((await mallory.list_calls(target="crew:demo")).calls) == []
    assert [c.call_id for c in (await owner.list_calls()).calls] == [call.call_id]
    assert [c.call_id for c in (await operator.list_calls()).calls] == [call.call_id]


async def test_listing_refuses_bad_cursors_limits_and_filters_clearly_V1_P6(clients, echo):
    """V1 P6: a cursor that is not one, a limit past 200, a caller that is no principal
    and an empty time range are refused with INVALID_ARGUMENT saying so."""
    alice = await clients("user:alice")
    with pytest.raises(errors.InvalidArgument, match="is not a cursor of this list"):
        await alice.list_calls(after="bm90IGEgY3Vyc29y")
    targets_cursor = (await alice.list_targets(limit=1)).next_cursor or "x"
    with pytest.raises(errors.InvalidArgument, match="is not a cursor of this list"):
        await alice.list_calls(after=targets_cursor)
    with pytest.raises(errors.InvalidArgument, match="limit must be between 1 and 200"):
        await alice.list_calls(limit=201)
    with pytest.raises(errors.InvalidArgument, match="caller"):
        await alice.list_calls(caller="alice")
    now = datetime.now(UTC)
    with pytest.raises(errors.InvalidArgument, match="is not before created_before"):
        await alice.list_calls(created_after=now, created_before=now)


async def test_targets_are_listed_with_functions_and_running_slots_under_A3_V1(
    clients, operator, owner, echo, summarize
):
    """V1 A3: targets come with their functions and running slots in use and free; the
    owner sees all its functions, a caller the targets with a function it may call (only
    those), someone who may call nothing sees no target, the operator every target;
    pages cross a boundary by (kind, name)."""
    await operator.register_target("crew:other", owner="user:zed", running_limit=2)
    await operator.register_target("workflow:wf", owner="user:zed")
    alice = await clients("user:alice")
    agent = await clients("agent:alpha/one")
    stranger = await clients("agent:beta/two")
    await alice.call("crew:demo", echo, {"text": "x"})

    (mine,) = (await owner.list_targets()).targets
    assert target_str(mine.target.ref) == "crew:demo" and mine.target.owner == "user:owner"
    assert [f.name for f in mine.functions] == ["echo", "summarize"]
    assert (mine.running, mine.free) == (1, mine.target.effective_running_limit - 1)

    (seen,) = (await agent.list_targets()).targets  # agent:alpha/* may call echo only
    assert [f.name for f in seen.functions] == ["echo"]
    assert list((await stranger.list_targets()).targets) == []

    first = await operator.list_targets(limit=2)
    assert [target_str(s.target.ref) for s in first.targets] == ["crew:demo", "crew:other"]
    second = await operator.list_targets(limit=2, after=first.next_cursor)
    assert [target_str(s.target.ref) for s in second.targets] == ["workflow:wf"]
    assert second.next_cursor == ""
    other = (await operator.list_targets(target="crew:other")).targets[0]
    assert (other.running, other.free, other.target.effective_running_limit) == (0, 2, 2)
