"""Per-principal shares (B7) in memory: what a principal holds is kept while it matters
and forgotten once it holds nothing, so that the entries do not grow with every principal
ever seen."""

from __future__ import annotations

import pytest

from agentworks.core.errors import Busy
from agentworks.server import shares
from agentworks.server.shares import Share, Shares


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(shares.time, "monotonic", made)
    return made


def test_a_principal_that_created_is_forgotten_once_its_bucket_is_full_again_B7(clock):
    """B7: after a creation the principal's bucket is kept (it bounds the next ones) while
    it refills; once it is full again and nothing is open, the entry goes, and the bucket
    a principal starts with is the same full one."""
    held = Shares(Share(creates_per_second=2.0, burst=2))
    with held.request("user:alice"):
        held.create("user:alice")
        held.create("user:alice")
        with pytest.raises(Busy) as refused:
            held.create("user:alice")
    assert refused.value.retry_after == pytest.approx(0.5)
    assert "user:alice" in held._held  # refilling: still bounds the next creations
    clock.now += 0.5
    with held.request("user:alice"):
        held.create("user:alice")  # one refilled
        with pytest.raises(Busy):
            held.create("user:alice")
    clock.now += 1.0
    with held.request("user:alice"):
        pass
    assert held._held == {}  # full again: as if never seen
    with held.request("user:alice"):
        held.create("user:alice")
        held.create("user:alice")
        with pytest.raises(Busy):
            held.create("user:alice")


def test_idle_entries_are_dropped_as_new_principals_come_B7(clock):
    """B7: principals that created once and never came back are dropped when new ones
    arrive past the threshold, once their buckets are full again; while they refill, or
    while one holds a request, they are kept."""
    refilling = Shares(Share(creates_per_second=1.0, burst=1))
    for number in range(shares._FORGET_AT_LEAST):
        refilling.create(f"user:u{number}")
    clock.now += 0.5  # half refilled: each still bounds its next creation
    refilling.create("user:late")
    assert len(refilling._held) == shares._FORGET_AT_LEAST + 1

    full = Shares(Share(creates_per_second=1.0, burst=1))
    for number in range(shares._FORGET_AT_LEAST):
        full.create(f"user:u{number}")
    full.enter_request("user:u0")
    clock.now += 1.0  # full again
    full.create("user:new")
    assert set(full._held) == {"user:u0", "user:new"}
    full.leave_request("user:u0")
    assert set(full._held) == {"user:new"}
