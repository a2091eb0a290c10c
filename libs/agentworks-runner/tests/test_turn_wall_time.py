"""A turn past its wall time is ended, and a runtime runs turns of different
conversations at once (B9), against a real messaging service and the real sandbox.

Before: a turn command that never exited held its turn (the heartbeats kept the lease)
until the command's 3,600 s `wall_seconds`, and a runtime ran one turn at a time, so
every other conversation of the crew waited that long.
"""

# The fixtures imported by name below are the tests' parameters.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import time
from collections.abc import AsyncIterator

import pytest

from agentworks.client import MessagingClient
from agentworks.core.keys import KeyDirectory
from agentworks.runner.limits import Limits, Policy
from agentworks.runner.turn_runner import TurnCommandRunner
from agentworks.runtime import TurnOutcome
from agentworks.runtime.config import DEFAULT_TURN_CONCURRENCY, DEFAULT_TURN_SECONDS, RuntimeConfig
from agentworks.runtime.turns import TurnTimedOut
from agentworks.server.testing import until
from tests.fixtures.agent_tools import (  # noqa: F401 - fixtures, used by name
    AGENT,
    CREW,
    alice,
    turn_worker,
)

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only")

TURN_SECONDS = 2
ENV = {"AGENTWORKS_RUNTIME_CREDENTIAL": "awr_" + "c" * 43, "AGENTWORKS_GATEWAY_URL": "http://x"}
ENV["AGENTWORKS_RUNTIME_TARGETS"] = CREW
# Hangs (a sleep no other test runs) when its turn's message says "hang".
COMMAND = 'if grep -q hang "$AGENTWORKS_TURN_FILE"; then exec sleep 617; fi; echo served'


@pytest.fixture
async def bob(messaging, identity) -> AsyncIterator[MessagingClient]:
    """user:bob on messaging: another caller of crew:demo."""
    client = MessagingClient(messaging.address, identity=identity("user:bob"))
    yield client
    await client.close()


@contextlib.asynccontextmanager
async def serving(messaging, identity, root: pathlib.Path, concurrency: int):
    """A turn runtime for crew:demo running COMMAND per turn; yields its outcomes."""
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    runner = TurnCommandRunner(
        {CREW: COMMAND},
        root=root,
        policy=Policy(limits=Limits(wall_seconds=3600, cpu_seconds=5, processes=16)),
        mcp=False,
        kill_grace_seconds=1,
    )
    async with turn_worker(
        messaging,
        identity(AGENT),
        runner,
        concurrency=concurrency,
        turn_seconds=TURN_SECONDS,
        on_finished=outcomes.put_nowait,
    ):
        yield outcomes


def sleepers() -> list[int]:
    """Host processes running `sleep 617` (zombies left out)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if (
                entry.name.isdigit()
                and (entry / "cmdline").read_bytes() == b"sleep\x00617\x00"
                and b") Z " not in (entry / "stat").read_bytes()
            ):
                found.append(int(entry.name))
    return found


def test_the_defaults_are_stated_and_the_demo_crews_turns_end_after_120_s_B9(tmp_path):
    """B9: 4 turns at once and 600 s per turn unless told; `agentworks up` runs the demo
    crew's turns with 120 s unless its environment says otherwise."""
    assert (DEFAULT_TURN_CONCURRENCY, DEFAULT_TURN_SECONDS) == (4, 600)
    assert RuntimeConfig.from_env(ENV).turn_concurrency == 4
    told = RuntimeConfig.from_env({**ENV, "AGENTWORKS_RUNTIME_CONCURRENCY": "2"})
    assert told.turn_concurrency == 2 and told.turn_seconds == 600
    up = pytest.importorskip("agentworks_dev.up")
    for environ, seconds in (({}, "120"), ({"AGENTWORKS_RUNTIME_TURN_SECONDS": "30"}, "30")):
        supervisor = up.Supervisor(
            up.parse_args(["--home", str(tmp_path)], {}), {"PATH": "/usr/bin", **environ}
        )
        supervisor.database_url, supervisor.webhook_key = "postgresql://localhost/x", "whk"
        supervisor.keys = KeyDirectory(tmp_path / "keys")
        supervisor.runtime_credential = "awr_" + "c" * 43  # the demo runtimes' (T2)
        turns = supervisor.runtime_children()[0]
        assert turns.env["AGENTWORKS_RUNTIME_TURN_SECONDS"] == seconds


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="A turn that never exits (B9)",
    action="a crew's turn command hangs (sleep) on one caller's conversation while another "
    "caller writes to the same crew",
    check="the other conversation's turn is served at once (2 turns at a time); the hung "
    "turn's sandbox is ended at the turn's wall time (2 s here, 120 s for the demo crew) "
    "and its conversation's next turn is served",
)
async def test_a_hung_turn_is_ended_at_its_wall_time_and_others_are_served_meanwhile_B9(
    messaging, identity, alice, bob, tmp_path
):
    """B9: with two turns at a time, bob's turn is served while alice's hangs; alice's is
    ended at the wall time (TurnTimedOut; the command's sandbox gone; the turn completed),
    and her conversation's next turn is served."""
    async with serving(messaging, identity, tmp_path / "project", 2) as outcomes:
        hung = await alice.send("hang", target=CREW)
        started = time.monotonic()
        served = await bob.send("hello", target=CREW)
        first = await asyncio.wait_for(outcomes.get(), 10)
        assert first.conversation_id == served.conversation_id and first.error is None
        assert time.monotonic() - started < TURN_SECONDS  # not behind the hung turn
        # The hung command's sandbox may still be starting when bob's turn is done.
        await until(sleepers, TURN_SECONDS, every=0.05, what="the hanging command running")
        ended = await asyncio.wait_for(outcomes.get(), 15)
        took = time.monotonic() - started
        assert ended.conversation_id == hung.conversation_id
        assert isinstance(ended.error, TurnTimedOut) and ended.completed, ended
        assert TURN_SECONDS <= took < TURN_SECONDS + 5, took
        assert sleepers() == []
        await alice.send("again", inbox_id=hung.inbox_id)
        after = await asyncio.wait_for(outcomes.get(), 10)
        assert after.conversation_id == hung.conversation_id and after.error is None
    assert list((tmp_path / "project" / ".turns").iterdir()) == []
