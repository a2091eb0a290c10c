"""The command runner serving turns to an MCP agent program (L2, T3, T6), end to end.

Real messaging, scheduler and functions services, the real command runner in the real
bubblewrap sandbox, and for the agent process a real program on the official MCP
client (`tests/fixtures/mcp_agent.py`) that finds its tools in the `mcpServers` file
the runner wrote. The attackers are commands in sandboxes of their own that go for
another item's endpoint, or keep their own past their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import shutil
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from agentworks.agents.agent_mcp.bridge import connect_unix
from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import state_name
from agentworks.core.errors import PermissionDenied
from agentworks.core.identity import Forwarded
from agentworks.runner.limits import GIB, MIB, Limits, Policy
from agentworks.runner.runner import CommandRunner
from agentworks.runner.turn_runner import TURNS_FOLDER, TurnCommandRunner
from agentworks.runtime import ExecutionContext, ExecutionWorker, TurnOutcome, TurnWorker
from agentworks.runtime.executions import ExecutionOutcome
from agentworks.server.testing import read_until, until
from tests.fixtures.isolation import PY, messages

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only"),
    pytest.mark.timeout(120),
]

CREW = "crew:demo"
AGENT = "agent:demo/demo-bot"
WAIT = 45
AGENT_SCRIPT = pathlib.Path(__file__).parent / "fixtures" / "mcp_agent.py"
# The agent program runs on the test venv's Python (it needs the `mcp` package), which
# its sandbox shows read-only; nothing else of the host.
POLICY = Policy(
    limits=Limits(
        wall_seconds=60,
        cpu_seconds=30,
        memory_bytes=1 * GIB,
        processes=64,
        open_files=256,
        output_bytes=16 * MIB,
    ),
    network="none",
    read_only=(sys.prefix,),
)


@pytest.fixture
async def services(messaging, start_scheduler, start_functions, identity):
    """messaging (crew:demo), a scheduler, and functions with crew:tools' `shout` and
    `interview` (which asks a question; both callable by crew demo's agents, interview
    by workflow:wf too) served by a plain ExecutionWorker, and workflow:wf's `research`."""
    scheduler = await start_scheduler()
    functions = await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)
    async with (
        MessagingClient(messaging.address, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(functions.address, identity=identity("user:ops", {"operator"})) as fops,
        FunctionsClient(functions.address, identity=identity("user:owner")) as owner,
    ):
        await ops.register_target(CREW, owner="user:owner")
        await fops.register_target("crew:tools", owner="user:owner")
        await fops.register_target(CREW, owner="user:owner")
        await owner.declare_function(
            "crew:tools",
            "shout",
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            allowed_callers=["agent:demo/*"],
        )
        await owner.declare_function(
            CREW, "spy", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
        await owner.declare_function(
            "crew:tools",
            "interview",
            input_schema={"type": "object"},
            allowed_callers=["agent:demo/*", "workflow:wf"],
        )
        await fops.register_target("workflow:wf", owner="user:owner")
        await owner.declare_function(
            "workflow:wf",
            "research",
            input_schema={"type": "object"},
            output_schema={"type": "object"},
            allowed_callers=["user:*"],
            workflow={"route": "r"},
        )

    async def shout(ctx: ExecutionContext) -> str:
        return ctx.inputs["text"].upper() + "!"

    async def interview(ctx: ExecutionContext) -> str:
        return f"you said {await ctx.ask('Which colour?')}"

    worker = ExecutionWorker(
        functions.address,
        identity("agent:tools/bot"),
        ["crew:tools"],
        {"shout": shout, "interview": interview},
    )
    worker.wait_seconds = 2
    task = asyncio.create_task(worker.run())
    yield messaging, scheduler, functions
    worker.stop()
    await asyncio.wait_for(task, WAIT)


@contextlib.asynccontextmanager
async def turns(
    services: Any, identity: Any, root: pathlib.Path, command: list[str]
) -> AsyncIterator[tuple[asyncio.Queue[TurnOutcome], TurnCommandRunner]]:
    """The command runner serving crew:demo's turns with `command`, in its sandbox;
    yields the queue of finished turns and the runner."""
    messaging, scheduler, functions = services
    runner = TurnCommandRunner({CREW: command}, root=root, kill_grace_seconds=1, policy=POLICY)
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    worker = TurnWorker(
        messaging.address,
        identity(AGENT),
        [CREW],
        runner,
        scheduler_address=scheduler.address,
        functions_address=functions.address,
        wait_seconds=2,
        lease_seconds=10,
        concurrency=2,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        yield outcomes, runner
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)


@pytest.fixture
async def alice(services, identity) -> AsyncIterator[MessagingClient]:
    async with MessagingClient(services[0].address, identity=identity("user:alice")) as client:
        yield client


def project(tmp_path: pathlib.Path) -> pathlib.Path:
    """The project root (shared by the turns and calls: writable by the sandbox's user),
    with the agent program in it."""
    root = tmp_path / "project"
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    shutil.copy(AGENT_SCRIPT, root / "agent.py")
    return root


async def test_an_mcp_agent_holds_a_conversation_under_the_command_runner_L2_L11_T3_C6_S1_F13(
    services, alice, identity, tmp_path
):
    """L2 L11 T3 C6 S1 F13: a message starts a turn whose command (an MCP client, in the
    sandbox, with no network) finds its tools in the mcpServers file, reads its turn from
    the endpoint's resource the instructions name (the turn file's document) and, through
    the stdio bridge, replies, asks for a wake-up and calls crew:tools' `shout`; the
    wake-up comes back as a later turn (answered over Streamable HTTP on the socket) and
    so does the call's completion. Only the explicit replies reach alice, as the
    agent; the stdout is not forwarded; each turn's folder is gone after it."""
    root = project(tmp_path)
    agent = [sys.executable, str(root / "agent.py")]
    async with turns(services, identity, root, agent) as (done, _):
        receipt = await alice.send("hello", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 3, WAIT)
        ended = [await asyncio.wait_for(done.get(), WAIT) for _ in range(2)]
        while len(texts) < 3 or not done.empty():
            ended.append(await asyncio.wait_for(done.get(), WAIT))
    assert texts[0] == "on it: hello", texts
    later = sorted(texts[1:])
    assert later[1] == "woke up: check on hello", texts
    call_id, status = later[0].split()
    assert status == "completed", texts
    assert all(o.completed and o.error is None for o in ended), ended
    assert {o.conversation_id for o in ended} == {receipt.conversation_id}
    page = await alice.read(receipt.inbox_id, limit=10)
    assert {m.sender for m in page.messages} == {AGENT}
    assert not [m for m in page.messages if m.text.startswith("called")]  # stdout stays
    async with FunctionsClient(services[2].address, identity=identity("user:owner")) as owner:
        call = await owner.get_status(call_id)
    assert call.caller == AGENT and call.answer == "HELLO!"
    assert list((root / TURNS_FOLDER).iterdir()) == []


async def test_an_mcp_agent_lists_calls_reads_and_answers_a_function_in_its_turn_L1_L2_T3_F11(
    services, alice, identity, tmp_path
):
    """L1 L2 T3 F11: over its MCP endpoint (the turn's capability only) the agent lists
    crew:tools' functions, calls `interview`, reads the call until it asks, answers it
    and reads it until it ends, and replies with what it saw; the call is the agent's,
    notified into this conversation (its completion comes back as a later turn)."""
    root = project(tmp_path)
    agent = [sys.executable, str(root / "agent.py")]
    async with turns(services, identity, root, agent) as (done, _):
        receipt = await alice.send("ask", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 2, WAIT)
        ended = [await asyncio.wait_for(done.get(), WAIT) for _ in range(2)]
    assert texts[0] == "interview,shout | Which colour? | completed: you said blue", texts
    call_id, status = texts[1].split()
    assert status == "completed", texts
    assert all(o.completed and o.error is None for o in ended), ended
    async with FunctionsClient(services[2].address, identity=identity("user:owner")) as owner:
        call = await owner.get_status(call_id)
    assert call.caller == AGENT and call.answer == "you said blue"


async def test_a_workflow_steps_command_uses_the_function_tools_over_its_endpoint_L8_L2_L11_T3_F14(
    services, identity, tmp_path
):
    """L8 L2 L11 T3 F14: a workflow function's command, over its execution's MCP endpoint,
    reads its call from agentworks://execution/input (named in the instructions), lists
    crew:tools' functions (only `interview`: workflow:wf may not call `shout`), calls
    `interview` as step `ask` of its run, reads the call until it asks, answers it and
    reads it until it ends; the retried step gets the same call. The call names
    workflow:wf and the run as its source."""
    _, _, functions = services
    root = project(tmp_path)
    runner = CommandRunner(
        {"research": [sys.executable, str(root / "agent.py")]}, kill_grace_seconds=1, policy=POLICY
    )
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    worker = ExecutionWorker(
        functions.address,
        identity("workflow:wf"),
        ["workflow:wf"],
        runner,
        root=root,
        wait_seconds=2,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        async with FunctionsClient(functions.address, identity=identity("user:alice")) as caller:
            made = await caller.call("workflow:wf", "research", {})
            await asyncio.wait_for(outcomes.get(), WAIT)
            status = await caller.get_status(made.call_id)
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
    assert state_name(status.status) == "completed", (status.error, status.answer)
    result = json.loads(status.result_json)
    said = "interview | Which colour? | completed: you said blue | same call"
    assert result["said"] == said, result
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        inner = await owner.get_status(result["call_id"])
    assert inner.caller == "workflow:wf" and inner.answer == "you said blue"
    assert (inner.source.run_id, inner.source.step) == (status.run.run_id, "ask")


async def test_an_agent_that_keeps_its_endpoint_and_capability_gets_nothing_after_its_turn_L2_T3(
    services, alice, identity, tmp_path
):
    """L2 T3: an agent leaves its endpoint's socket path and token and its capability
    in the project root during its turn; once the turn has ended, the socket is gone
    (nothing to connect to) and the capability sends nothing (ended with its lease)."""
    root = project(tmp_path)
    agent = [sys.executable, str(root / "agent.py")]
    async with turns(services, identity, root, agent) as (done, _):
        receipt = await alice.send("keep", target=CREW)
        await read_until(alice, receipt.inbox_id, 1, WAIT)
        first = await asyncio.wait_for(done.get(), WAIT)
        assert first.completed and first.error is None, first
        escape = json.loads((root / "escape.json").read_text())
        with pytest.raises(OSError):
            connect_unix(escape["socket"], timeout=2)
        async with MessagingClient(
            services[0].address, identity=Forwarded(escape["capability"])
        ) as kept:
            with pytest.raises(PermissionDenied, match="has ended with its lease"):
                await kept.send_message(escape["inbox_id"], "after my turn")


VICTIM = """
import os, pathlib, time
root = pathlib.Path(os.environ["AGENTWORKS_PROJECT_ROOT"])
(root / "victim-running").write_text(os.environ["AGENTWORKS_MCP_SOCKET"])
for _ in range(400):  # the victim's own poll: it runs where no test helper is importable
    if (root / "release").exists():
        break
    time.sleep(0.1)
"""

ATTACKER = """
import json, os, pathlib, socket
root = pathlib.Path(os.environ["AGENTWORKS_PROJECT_ROOT"])
target = (root / "target").read_text()
seen = {
    "exists": os.path.exists(target),
    "folder": os.path.exists(os.path.dirname(target)),
    "turns": sorted(os.listdir(root / ".turns")) if os.path.isdir(root / ".turns") else None,
    "run": sorted(os.listdir("/run/agentworks")),
    "mine": os.environ["AGENTWORKS_MCP_SOCKET"],
}
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect(target)
    seen["connect"] = "connected"
except OSError as exc:
    seen["connect"] = type(exc).__name__
print(json.dumps(seen), flush=True)
"""


async def test_a_command_cannot_reach_the_mcp_endpoint_of_another_running_turn_L2_T6_T3(
    services, alice, identity, tmp_path
):
    """L2 T6 T3: while a turn's command runs (its endpoint live: the host reaches it,
    and is refused without the token), an execution's command on the same root, in
    its own sandbox, is told where the turn's socket is on the host: neither it nor its
    folder exists there, `.turns` shows nothing, `/run/agentworks` holds its own
    socket alone, and connecting fails."""
    _, _, functions = services
    root = project(tmp_path)
    runner = CommandRunner({"spy": [PY, "-I", "-S", "-c", ATTACKER]}, kill_grace_seconds=1)
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    attacker = ExecutionWorker(
        functions.address,
        identity("agent:demo/runner"),
        [CREW],
        runner,
        root=root,
        wait_seconds=2,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(attacker.run())
    victim = [PY, "-I", "-S", "-c", VICTIM]
    try:
        async with (
            turns(services, identity, root, victim) as (done, turn_runner),
            FunctionsClient(functions.address, identity=identity("user:alice")) as caller,
        ):
            await alice.send("anything", target=CREW)
            await until(lambda: (root / "victim-running").exists(), 30, what="the victim runs")
            # The one socket of the turn runner: the turn's, live while its command runs.
            assert turn_runner._sockets is not None
            (target_path,) = turn_runner._sockets.iterdir()
            target = str(target_path)
            (root / "target").write_text(target)
            call = await caller.call(CREW, "spy", {})
            await asyncio.wait_for(outcomes.get(), WAIT)
            status = await caller.get_status(call.call_id)
            # The control: the endpoint was there all along, and guarded by its token.
            transport = httpx2.AsyncHTTPTransport(uds=target)
            async with httpx2.AsyncClient(transport=transport, timeout=5) as http:
                answer = await http.post(
                    "http://localhost/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
                )
            (root / "release").write_text("")
            victim_turn = await asyncio.wait_for(done.get(), WAIT)
            lines = [text for role, text in await messages(caller, call.call_id)]
    finally:
        attacker.stop()
        await asyncio.wait_for(task, WAIT)
    assert answer.status_code == 401
    assert state_name(status.status) == "completed", status.error
    (seen,) = (json.loads(line) for line in lines if line.startswith("{"))
    assert seen == {
        "exists": False,
        "folder": False,
        "turns": [],
        "run": ["init.py", "mcp.sock", "mcp_bridge.py"],
        "mine": "/run/agentworks/mcp.sock",
        "connect": "FileNotFoundError",
    }, seen
    assert victim_turn.completed and victim_turn.error is None


async def test_run_commands_serves_turn_commands_with_their_mcp_endpoint_L2_R2(
    services, alice, signing_keys, tmp_path
):
    """L2 R2: `agentworks-runtime run-commands` with a config holding `turns` (and no
    function commands) serves crew:demo's turns in its sandbox: the MCP agent replies
    and its wake-up comes back; SIGTERM stops it (exit 0)."""
    messaging, scheduler, functions = services
    root = project(tmp_path)
    config = {
        "turns": {CREW: [sys.executable, str(root / "agent.py")]},
        "network": "none",
        "read_only": [sys.prefix],
        "limits": {"memory_bytes": "1GiB", "wall_seconds": 60},
    }
    process = await asyncio.create_subprocess_exec(
        str(pathlib.Path(sys.executable).parent / "agentworks-runtime"),
        "run-commands",
        "--commands",
        json.dumps(config),
        "--root",
        str(root),
        "--target",
        CREW,
        "--messaging-address",
        messaging.address,
        "--scheduler-address",
        scheduler.address,
        "--functions-address",
        functions.address,
        env={
            **os.environ,
            **signing_keys.env("gateway"),
            "AGENTWORKS_RUNTIME_PRINCIPAL": AGENT,
            "AGENTWORKS_RUNTIME_WAIT_SECONDS": "2",
            "LOG_JSON": "false",
        },
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    texts: list[str] = []
    try:
        receipt = await alice.send("from the cli", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 3, WAIT)
    except AssertionError:
        pass  # said below, with what the runner logged
    finally:
        if process.returncode is None:
            process.terminate()
        _, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert texts and texts[0] == "on it: from the cli", (texts, err[-3000:])
    assert "woke up: check on from the cli" in texts
    assert process.returncode == 0, err[-3000:]
