"""A failed turn command's stderr tail, read by the crew's owner (L12) and by nobody else
(A3), end to end: real messaging and gateway, the real command runner in the real
bubblewrap sandbox, the console's conversation page and the `agentworks` CLI.

Before: a failed turn's stderr lived only in the runner's log; the owner saw nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentworks.client import MessagingClient
from agentworks.runner.limits import Limits, Policy
from agentworks.runner.turn_runner import TurnCommandRunner
from agentworks.runtime import TurnOutcome
from tests.fixtures.agent_tools import AGENT, CREW, turn_worker

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only"),
    pytest.mark.timeout(120),
]

WAIT = 30
SECRET = "crew-internal-detail-4711"
# 60 lines of stderr (the last 40 are kept), the last one naming a detail of the crew's.
COMMAND = (
    'for n in $(seq 1 59); do echo "trace line $n" >&2; done; '
    f'echo "RuntimeError: {SECRET}" >&2; exit 3'
)


def turn_errors(page: Any) -> list[str]:
    return [e.delivery.turn_error for e in page.entries if e.HasField("delivery")]


@pytest.fixture
def scheduler_address(scheduler) -> str:
    """The gateway talks to the in-process scheduler (the console lists timers)."""
    return scheduler.address


@pytest.fixture
async def failed_turn(
    gateway, demo, messaging, identity, make_token, api, tmp_path
) -> AsyncIterator[dict[str, Any]]:
    """alice's conversation with crew:demo (owned by user:owner), whose one turn the
    runner ran as COMMAND in the sandbox and which failed."""
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    runner = TurnCommandRunner(
        {CREW: COMMAND},
        root=tmp_path / "project",
        policy=Policy(limits=Limits(wall_seconds=60, cpu_seconds=10, processes=16)),
        mcp=False,
        kill_grace_seconds=1,
    )
    tokens = {
        who: await make_token(f"user:{who}", operator=who == "ops")
        for who in ("alice", "owner", "ops")
    }
    sent = await api(tokens["alice"]).post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hi"}
    )
    assert sent.status_code == 200, sent.text
    async with turn_worker(messaging, identity(AGENT), runner, on_finished=outcomes.put_nowait):
        outcome = await asyncio.wait_for(outcomes.get(), WAIT)
    assert outcome.completed and outcome.error is not None, outcome
    yield {"conversation_id": sent.json()["conversation_id"], "tokens": tokens}


async def test_the_owner_reads_a_failed_turns_stderr_tail_and_the_caller_does_not_L12_A3(
    failed_turn, messaging, identity
):
    """L12: the turn's delivery carries the command's exit status and its stderr's last
    40 lines for the target's owner and the operator in GetTranscript; A3: alice, who
    started the conversation, reads the same transcript without it."""
    conversation_id = failed_turn["conversation_id"]
    for principal, roles in (("user:owner", set()), ("user:ops", {"operator"})):
        async with MessagingClient(messaging.address, identity=identity(principal, roles)) as c:
            [error] = turn_errors(await c.get_transcript(conversation_id))
        lines = error.splitlines()
        assert lines[0] == "command /bin/sh exited with status 3", error
        assert lines[1:] == [f"trace line {n}" for n in range(21, 60)] + [f"RuntimeError: {SECRET}"]
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as alice:
        page = await alice.get_transcript(conversation_id)
    assert turn_errors(page) == [""]
    assert SECRET not in str(page)


async def test_the_console_and_the_cli_show_the_tail_to_the_owner_only_L12_A3(
    failed_turn, gateway, api, cli
):
    """L12: the owner's console conversation page and `agentworks messages transcript`
    show the tail; A3: alice's (the caller's) page, CLI output and JSON do not."""
    conversation_id = failed_turn["conversation_id"]
    tokens = failed_turn["tokens"]
    for who, sees in (("owner", True), ("alice", False)):
        http = api(None)
        signed = await http.post(
            "/console/sign-in", data={"token": tokens[who]}, headers={"Origin": gateway.url}
        )
        assert signed.status_code == 303, signed.text
        cookie = f"aw_console={signed.cookies['aw_console']}"
        http.cookies.clear()
        page = await http.get(
            f"/console/conversations/{conversation_id}", headers={"Cookie": cookie}
        )
        assert page.status_code == 200, page.text
        assert ('data-testid="turn-error"' in page.text) is sees
        assert (f"RuntimeError: {SECRET}" in page.text) is sees
        assert ("trace line 59" in page.text) is sees

        env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": tokens[who]}
        args = ("messages", "transcript", "--conversation", conversation_id)
        code, out, err = await cli(*args, env=env)
        assert code == 0, err
        assert ("its turn failed:" in out) is sees, out
        assert (SECRET in out) is sees, out
        code, out, err = await cli(*args, "--json", env=env)
        assert code == 0, err
        assert (SECRET in out) is sees, out
