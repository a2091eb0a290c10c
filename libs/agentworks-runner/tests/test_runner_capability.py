"""What a command the runner starts holds (T3): its execution's capability, nothing
that can do more. A real runner against the functions service, a real child process."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import textwrap

import pytest

import agentworks.client
import agentworks.core
import agentworks.runtime
from agentworks.client.functions import state_name
from agentworks.functions.v1 import functions_pb2
from agentworks.runner.limits import Policy
from agentworks.runner.runner import CommandRunner
from agentworks.runtime.executions import ExecutionOutcome, ExecutionWorker

pytestmark = pytest.mark.timeout(120)

# The child: what its environment holds, and what its capability can and cannot do.
# Where the agentworks packages' sources are (editable installs in the test venv).
SOURCES = tuple(
    {
        str(next(d for d in pathlib.Path(m.__file__).resolve().parents if d.name == "src"))
        for m in (agentworks.core, agentworks.client, agentworks.runtime, functions_pb2)
        if m.__file__
    }
)

CHILD = textwrap.dedent(
    """
    import asyncio, json, os, stat, sys, time
    from agentworks.client import FunctionsClient
    from agentworks.core.capability_identity import CapabilityIdentity
    from agentworks.core.errors import AgentWorksError

    SECRET = ("SIGNING_KEY", "RUNTIME_CREDENTIAL", "TLS_KEY_FILE", "DATABASE_URL", "TOKEN")
    path = os.environ["AGENTWORKS_CAPABILITY_FILE"]

    async def code(step):
        try:
            await step
        except AgentWorksError as exc:
            return exc.code.name + ": " + exc.message
        return "OK"

    async def main():
        call_id = os.environ["AGENTWORKS_CALL_ID"]
        other = json.loads(os.environ["AGENTWORKS_INPUTS"])["text"]
        identity = CapabilityIdentity.from_env()
        async with FunctionsClient(
            os.environ["AGENTWORKS_FUNCTIONS_ADDRESS"], identity=identity
        ) as functions:
            seen = {
                "secrets": sorted(n for n in os.environ if any(s in n for s in SECRET)),
                "has_capability": bool(os.environ.get("AGENTWORKS_CAPABILITY")),
                "file_mode": oct(stat.S_IMODE(os.stat(path).st_mode)),
                "own": await code(functions.report(call_id, progress="from the child")),
                "other": await code(functions.report(other, progress="not mine")),
                "call": await code(functions.call("crew:demo", "echo", {"text": "x"})),
                "cancel": await code(functions.cancel(other)),
                "claim": await code(functions.claim_execution(["crew:demo"])),
            }
            # The runner rewrites the file as the lease renews (a heartbeat each ~1.7 s).
            first = os.environ["AGENTWORKS_CAPABILITY"]
            deadline = time.monotonic() + 10
            while open(path).read() == first and time.monotonic() < deadline:
                time.sleep(0.1)
            seen["renewed"] = open(path).read() != first
            seen["after_renewal"] = await code(functions.report(call_id, progress="renewed"))
        print(json.dumps(seen))

    asyncio.run(main())
    """
)


async def test_a_command_gets_its_capability_and_no_key_or_credential_T3_R2(
    functions, identity, demo, echo, clients, tmp_path, monkeypatch
):
    """T3 R2: a command started by the runner finds no signing key, runtime credential,
    TLS key, token or database address in its environment, only the execution's
    capability (AGENTWORKS_CAPABILITY and a 0600 file, rewritten as the lease renews);
    with it, it reports on its own call, and is refused on another call, for Cancel and
    for a claim; it calls only as its runtime (which may not call echo: NOT_FOUND)."""
    secrets = {
        "AGENTWORKS_SIGNING_KEY": "/keys/runtime.pem",
        "AGENTWORKS_RUNTIME_CREDENTIAL": "awrc_secret",
        "AGENTWORKS_TLS_KEY_FILE": "/tls/runtime/tls.key",
        "FUNCTIONS_SIGNING_KEY": "/keys/functions.pem",
        "AGENTWORKS_TOKEN": "aw_token",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    alice = await clients("user:alice")
    other = await alice.call("crew:demo", "echo", {"text": "placeholder"})
    runtime = await clients("agent:demo/bot")
    held = await runtime.claim_execution(["crew:demo"], lease_seconds=60)
    assert held is not None and held.call_id == other.call_id
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    worker = ExecutionWorker(
        functions.address,
        identity("agent:demo/bot"),
        ["crew:demo"],
        CommandRunner(
            {"echo": [sys.executable, str(script)]},
            env={"AGENTWORKS_FUNCTIONS_ADDRESS": functions.address},
            # In its sandbox (T6) the child sees, read-only, this venv, the script and the
            # packages' sources the venv's editable installs point into.
            policy=Policy(read_only=(sys.prefix, str(script), *SOURCES)),
        ),
        root=tmp_path / "project",
        wait_seconds=2,
        lease_seconds=5,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        receipt = await alice.call("crew:demo", "echo", {"text": other.call_id})
        outcome = await asyncio.wait_for(outcomes.get(), 60)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    status = await alice.get_status(receipt.call_id)
    assert (outcome.status, state_name(status.status)) == ("completed", "completed"), status
    seen = json.loads(status.answer)
    assert seen["secrets"] == [], seen
    assert seen["has_capability"] and seen["file_mode"] == "0o600", seen
    assert seen["own"] == "OK", seen
    assert seen["other"].startswith("PERMISSION_DENIED") and other.call_id in seen["other"]
    assert seen["call"].startswith("NOT_FOUND: function 'echo'"), seen
    assert seen["cancel"].startswith("PERMISSION_DENIED: an execution capability"), seen
    assert seen["claim"].startswith("PERMISSION_DENIED"), seen
    assert seen["renewed"] and seen["after_renewal"] == "OK", seen
    assert status.progress == "renewed"
    # The capability file went with the command: never uploaded, not left in the folder.
    assert ".agentworks-capability" not in {f.name for f in status.files}
    folder = tmp_path / "project" / ".calls" / receipt.call_id
    assert not (folder / ".agentworks-capability").exists()
    assert (await alice.get_status(other.call_id)).progress == ""
