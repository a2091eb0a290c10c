"""The command runner (R2): a declared command per call, in `.calls/<call_id>/`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest
import structlog.testing

from agentworks.client import FunctionsClient
from agentworks.client.common import target_ref
from agentworks.client.functions import call_result, state_name
from agentworks.core import errors
from agentworks.core.keys import KeyDirectory
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runner import _watchdog
from agentworks.runner.limits import Policy
from agentworks.runner.runner import (
    RECORDS_FOLDER,
    CommandRunner,
    load_commands,
    parse_commands,
    reap_orphans,
)
from agentworks.runner.watch import descendants
from agentworks.runtime.executions import ExecutionContext, ExecutionOutcome, ExecutionWorker
from agentworks.server.testing import until

# One script plays every command: its first argument says how to behave.
COMMAND = textwrap.dedent(
    """
    import json, os, pathlib, sys, time
    mode = sys.argv[1]
    inputs = json.loads(os.environ["AGENTWORKS_INPUTS"])
    folder = pathlib.Path(os.environ["AGENTWORKS_OUTPUT_FOLDER"])
    assert pathlib.Path.cwd() == folder, (pathlib.Path.cwd(), folder)
    assert folder.name == os.environ["AGENTWORKS_CALL_ID"] and folder.parent.name == ".calls"
    result = pathlib.Path(os.environ["FUNCTION_RESULT_FILE"])
    print("reading", inputs["text"], flush=True)
    if mode == "ok":
        (folder / "out").mkdir()
        (folder / "out" / "report.txt").write_text("report for " + inputs["text"])
        result.write_text(json.dumps({"summary": inputs["text"].upper(), "words": 1}))
        print("wrote", result.name)
        print("all done")
    elif mode == "fail":
        (folder / "partial.txt").write_text("some of it")
        print("bad input: " + inputs["text"], file=sys.stderr)
        sys.exit(3)
    elif mode == "stderr":
        for n in range(100):
            print(f"line {n}", file=sys.stderr)
        sys.exit(1)
    elif mode == "correct":
        if os.environ.get("AGENTWORKS_CORRECTION_PROMPT"):
            print("correcting")
            result.write_text(json.dumps({"summary": "fixed", "words": 2}))
        else:
            result.write_text(json.dumps({"summary": 42}))
        print("finished")
    elif mode == "hang":
        (folder / "pid").write_text(str(os.getpid()))
        print("started", flush=True)
        time.sleep(600)
    elif mode == "tree":  # a leader and its child in one process group, both hanging
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (folder / "pids.tmp").write_text(f"{os.getpid()} {child.pid}")
        (folder / "pids.tmp").rename(folder / "pids")
        print("started", flush=True)
        time.sleep(600)
    elif mode == "leave":  # the leader exits at once; its child holds stdout open
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (folder / "pids.tmp").write_text(f"{os.getpid()} {child.pid}")
        (folder / "pids.tmp").rename(folder / "pids")
        print("started", flush=True)
    elif mode == "noisy":
        out = sys.stdout.buffer
        out.write(b"L" * 100_000 + b"\\n" + b"M" * 70_000 + b"\\n" + b"tab\\0bed\\n")
        sys.stderr.buffer.write(b"warn\\0ing\\n")
        out.write(b"hello\\0world")  # the last line, without a newline
    elif mode == "nulfail":
        sys.stderr.buffer.write(b"bad\\0thing\\n")
        sys.exit(1)
    elif mode == "files":
        for name in ("a.txt", "back" + chr(92) + "slash.txt", "new" + chr(10) + "line.txt"):
            (folder / name).write_text(name)
        (folder / "z").mkdir()
        (folder / "z" / "last.txt").write_text("last")
        print("made files")
    elif mode == "plant":  # links where the runner mounts its folders (B4)
        root = pathlib.Path(os.environ["AGENTWORKS_PROJECT_ROOT"])
        for name in (".turns", ".agentworks", ".calls"):
            try:
                os.symlink("/usr", root / name)
                print("planted", name)
            except OSError as exc:
                print("refused", name, type(exc).__name__)
    elif mode == "litter":  # links and a FIFO beside one plain file (B4, B10)
        for n in range(int(inputs["text"])):
            os.symlink("/etc/passwd", folder / f"link{n:05}")
        os.mkfifo(folder / "pipe")
        (folder / "ok.txt").write_text("fine")
        print("littered")
    elif mode == "many":
        for n in range(int(inputs["text"])):
            (folder / f"f{n:03}.txt").write_text(str(n))
        result.write_text(json.dumps({"summary": "many", "words": 0}))
        print("made", inputs["text"])
    """
)
# Modes with an output schema (the others return their last line).
SCHEMA_MODES = ("ok", "fail", "correct", "many")
MODES = (
    *SCHEMA_MODES,
    "stderr",
    "hang",
    "tree",
    "leave",
    "noisy",
    "nulfail",
    "files",
    "shell",
    "plant",
    "litter",
)
# The one command given as a string: run by /bin/sh -c, its exit status the line's.
SHELL_COMMAND = 'echo "function $AGENTWORKS_FUNCTION" | tr a-z A-Z; echo oops >&2; exit 3'

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "words": {"type": "integer"}},
    "required": ["summary", "words"],
}


@pytest.fixture
async def functions(database_url, signing_keys):
    from agentworks_functions.app import start
    from agentworks_functions.config import Config

    running = await start(
        Config.from_env(
            {
                "FUNCTIONS_DATABASE_URL": database_url,
                "FUNCTIONS_LISTEN": "127.0.0.1:0",
                **signing_keys.env("service:functions"),
                "LOG_JSON": "false",
                "FUNCTIONS_SWEEP_SECONDS": "0.2",
                "FUNCTIONS_MIN_LEASE_SECONDS": "1",
            }
        )
    )
    yield running
    await running.stop(0)


@pytest.fixture
async def client_for(functions, identity):
    made: list[FunctionsClient] = []

    async def make(principal: str, roles: frozenset[str] = frozenset()) -> FunctionsClient:
        client = FunctionsClient(functions.address, identity=identity(principal, roles))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


@pytest.fixture
async def alice(client_for):
    """user:alice, with crew:demo registered and its functions declared by user:owner."""
    ops = await client_for("user:ops", frozenset({"operator"}))
    await ops.register_target("crew:demo", owner="user:owner")
    owner = await client_for("user:owner")
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    for name in MODES:
        await owner.declare_function(
            "crew:demo",
            name,
            input_schema=schema,
            output_schema=SUMMARY_SCHEMA if name in SCHEMA_MODES else None,
            allowed_callers=["user:*"],
        )
    return await client_for("user:alice")


def visible(script: pathlib.Path) -> Policy:
    """What the sandbox needs to see, read-only, to run COMMAND: this venv and the script."""
    return Policy(read_only=(sys.prefix, str(script)))


@contextlib.asynccontextmanager
async def runner(functions, identity, root):
    """A command-runner runtime for crew:demo; yields the queue of finished executions."""
    script = root / "command.py"
    script.write_text(COMMAND)
    commands: dict[str, list[str] | str] = {m: [sys.executable, str(script), m] for m in MODES}
    commands["shell"] = SHELL_COMMAND
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    worker = ExecutionWorker(
        functions.address,
        identity("agent:demo/runner"),
        ["crew:demo"],
        CommandRunner(commands, kill_grace_seconds=2, policy=visible(script)),
        root=root / "project",
        wait_seconds=5,
        lease_seconds=3,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        yield outcomes
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)


async def test_runner_runs_the_command_in_the_call_folder_and_uploads_its_files_R2_F4_F10(
    functions, identity, alice, tmp_path
):
    """R2 F4 F10: cwd .calls/<call_id>/, FUNCTION_RESULT_FILE, stdout lines, files, answer."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "ok", {"text": "hello"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "completed" and status.answer == "all done"
    assert call_result(status) == {"summary": "HELLO", "words": 1}
    assert [(m.role, m.text) for m in status.messages] == [
        ("stdout", "reading hello"),
        ("stdout", "wrote result.json"),
        ("stdout", "all done"),
    ]
    assert {f.name for f in status.files} == {"result.json", "out/report.txt"}
    assert await alice.read_file_bytes(receipt.call_id, "out/report.txt") == b"report for hello"
    folder = tmp_path / "project" / ".calls" / receipt.call_id
    assert (folder / "out" / "report.txt").read_text() == "report for hello"
    # The record of the running command (outside the call's folder) went with it.
    assert list((tmp_path / "project" / RECORDS_FOLDER).iterdir()) == []


def _metric(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_the_runner_counts_its_sandbox_launches_and_the_commands_that_could_not_start_R2_P4(
    functions, identity, alice, tmp_path
):
    """R2 P4: each command started in bubblewrap counts in
    `agentworks_runtime_sandbox_launches_total{sandbox="bwrap"}`; a command that cannot
    start inside (no such program) counts in `agentworks_runtime_sandbox_failures_total
    {stage="exec"}`; the executions count as claimed and finished by outcome."""
    launched = _metric("agentworks_runtime_sandbox_launches_total", sandbox="bwrap")
    failed = _metric("agentworks_runtime_sandbox_failures_total", stage="exec")
    of_demo = {"kind": "execution", "target": "crew:demo"}
    claimed = _metric("agentworks_runtime_claimed_total", **of_demo)
    finished = _metric("agentworks_runtime_finished_total", **of_demo, outcome="failed")
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    commands: dict[str, list[str] | str] = {"ok": [sys.executable, str(script), "ok"]}
    commands["fail"] = [str(tmp_path / "no-such-program")]
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    worker = ExecutionWorker(
        functions.address,
        identity("agent:demo/runner"),
        ["crew:demo"],
        CommandRunner(commands, kill_grace_seconds=2, policy=visible(script)),
        root=tmp_path / "project",
        wait_seconds=5,
        lease_seconds=5,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(worker.run())
    try:
        await alice.call("crew:demo", "ok", {"text": "hi"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
        await alice.call("crew:demo", "fail", {"text": "hi"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "failed"
    finally:
        worker.stop()
        await asyncio.wait_for(task, 15)
    assert _metric("agentworks_runtime_sandbox_launches_total", sandbox="bwrap") == launched + 2
    assert _metric("agentworks_runtime_sandbox_failures_total", stage="exec") == failed + 1
    assert _metric("agentworks_runtime_claimed_total", **of_demo) == claimed + 2
    assert _metric("agentworks_runtime_finished_total", **of_demo, outcome="failed") == finished + 1


async def test_a_command_that_ends_before_the_runner_records_it_completes_and_leaves_no_record_R2(
    functions, identity, alice, tmp_path, monkeypatch
):
    """R2: the race behind a flake of the test above on a loaded machine: the command
    ended, and asyncio's child watcher reaped it, before the runner read its start time
    to record it. The runner then wrote no record and no `.calls/.runner/` (only a
    record created it), and the test's look into the folder raised FileNotFoundError.
    Made deterministic here: the command is reaped before `create_subprocess_exec`
    returns. The call completes; the records folder exists (made when the runner first
    works on the root) and holds no record; nothing is recorded for a pid that is no
    longer the command's (it could be another process's by now)."""
    spawn = asyncio.create_subprocess_exec
    reaped: list[int] = []

    async def spawn_and_reap(*args, **kwargs):
        process = await spawn(*args, **kwargs)
        await process.wait()  # ended and reaped: its pid may be given out again
        reaped.append(process.pid)
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn_and_reap)
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "ok", {"text": "hello"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
    assert len(reaped) == 1
    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "completed" and status.answer == "all done"
    assert list((tmp_path / "project" / RECORDS_FOLDER).iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard needs /proc")
def test_the_guard_records_no_process_that_is_not_its_unreaped_child_R2(tmp_path):
    """R2: a pid the runner did not start, or whose command was reaped already (the pid
    may be another process's), gets no record: a record would let a later runner kill
    someone else's process group. The watchdog is told of the group without a start
    time, as for a command whose start is unknown."""
    from agentworks.runner import guard as guard_module

    guard = guard_module._Guard()
    sent: list[dict[str, Any]] = []
    guard._send = lambda message: sent.append(message)  # type: ignore[method-assign]
    ctx = SimpleNamespace(root=tmp_path, call_id="c1", log=guard_module.log)
    not_ours = os.getppid()  # alive, with a start time, and not this process's child
    assert _watchdog.start_time(not_ours) is not None
    guard.track(not_ours, ctx, ["true"], 1.0)  # type: ignore[arg-type]
    assert not (tmp_path / RECORDS_FOLDER).exists() or not list(
        (tmp_path / RECORDS_FOLDER).iterdir()
    )
    assert sent == [{"track": not_ours, "start": None, "grace": 1.0, "record": sent[0]["record"]}]


async def test_runner_failure_keeps_stderr_and_files_and_gets_no_correction_turn_R2_F10(
    functions, identity, alice, tmp_path
):
    """R2 F10: a non-zero exit fails the call with the status and stderr; no correction."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "fail", {"text": "nope"})
        await asyncio.wait_for(outcomes.get(), 30)
    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "failed" and not status.correction_turn
    assert "exited with status 3: bad input: nope" in status.error
    assert await alice.read_file_bytes(receipt.call_id, "partial.txt") == b"some of it"


async def test_a_command_string_runs_in_a_shell_and_fails_with_its_exit_status_R2(
    functions, identity, alice, tmp_path
):
    """R2: a command given as a string runs by /bin/sh -c: `$VAR`, `|`, `;`, `>&2` and
    `exit 3` mean what they mean in a terminal, so the call fails with status 3 and the
    stderr line (it is not split into words and echoed as a success)."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "shell", {"text": "hi"})
        await asyncio.wait_for(outcomes.get(), 30)
    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "failed", status.answer
    assert "exited with status 3: oops" in status.error
    assert [m.text for m in status.messages] == ["FUNCTION SHELL"]


async def test_a_failed_commands_stderr_tail_is_an_event_its_caller_and_owner_read_L12(
    functions, identity, alice, client_for, tmp_path
):
    """L12: a failed command's stderr, its last 40 lines, is an event of kind `stderr`
    on the call, which the caller and the target's owner read; anyone else sees no call."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "stderr", {"text": "x"})
        await asyncio.wait_for(outcomes.get(), 30)
    for reader in (alice, await client_for("user:owner")):
        status = await reader.get_status(receipt.call_id)
        assert state_name(status.status) == "failed"
        [event] = [e for e in status.events if e.kind == "stderr"]
        assert event.text.splitlines() == [f"line {n}" for n in range(60, 100)]
    with pytest.raises(errors.NotFound):
        await (await client_for("user:mallory")).get_status(receipt.call_id)


async def test_runner_reruns_the_command_for_the_one_correction_turn_R2_F10(
    functions, identity, alice, tmp_path
):
    """R2 F10: an invalid result -> the command runs again with the correction prompt."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "correct", {"text": "x"})
        outcome = await asyncio.wait_for(outcomes.get(), 30)
    assert outcome.status == "completed" and outcome.corrected
    status = await alice.get_status(receipt.call_id)
    assert call_result(status) == {"summary": "fixed", "words": 2} and status.correction_turn
    assert "correcting" in [m.text for m in status.messages]


async def test_cancel_terminates_the_running_command_R2_F15(functions, identity, alice, tmp_path):
    """R2 F15: cancelling a call stops its command's process group."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "hang", {"text": "x"})

        async def started():
            status = await alice.get_status(receipt.call_id)
            while not status.messages:
                status = await alice.get_status(
                    receipt.call_id, wait_seconds=5, seen_version=status.version
                )

        await asyncio.wait_for(started(), 30)
        inner = int((tmp_path / "project" / ".calls" / receipt.call_id / "pid").read_text())
        (pid,) = in_host(tmp_path / "project", receipt.call_id, [inner])
        assert pid is not None
        await alice.cancel(receipt.call_id)
        outcome = await asyncio.wait_for(outcomes.get(), 30)
    assert outcome.status == "cancelled"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert state_name((await alice.get_status(receipt.call_id)).status) == "cancelled"


async def test_cancel_stops_what_the_command_left_running_after_it_exited_R2_F15(
    functions, identity, alice, tmp_path
):
    """R2 F15: a command whose leader has exited while a process it started still runs
    (and holds its output open) is still running; a cancel stops that process too."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "leave", {"text": "x"})
        pids = tmp_path / "project" / ".calls" / receipt.call_id / "pids"
        for _ in range(300):
            if pids.exists():
                break
            await asyncio.sleep(0.1)
        inner = [int(pid) for pid in pids.read_text().split()]
        await until(
            lambda: records_of(tmp_path / "project", receipt.call_id), 10, what="a running record"
        )
        # The leader may be gone already (reaped at once in its sandbox): None.
        leader, child = in_host(tmp_path / "project", receipt.call_id, inner)
        assert child is not None
        try:
            for _ in range(100):  # the leader has exited (a zombie until it is reaped)
                stat = None if leader is None else _watchdog.proc_stat(leader)
                if stat is None or stat[0] == "Z":
                    break
                await asyncio.sleep(0.1)
            assert state_name((await alice.get_status(receipt.call_id)).status) == "running"
            await alice.cancel(receipt.call_id)
            outcome = await asyncio.wait_for(outcomes.get(), 30)
            assert outcome.status == "cancelled"
            for _ in range(50):
                stat = _watchdog.proc_stat(child)
                if stat is None or stat[0] == "Z":
                    break
                await asyncio.sleep(0.1)
            assert stat is None or stat[0] == "Z", f"process {child} outlived the cancel"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


async def test_runner_cuts_long_lines_and_replaces_nul_characters_R2_F10(
    functions, identity, alice, tmp_path
):
    """R2 F10: stdout lines past 64 KiB are cut to MAX_LINE_BYTES with a note, and NUL
    characters become U+FFFD in messages, the final line and the stderr tail."""
    async with runner(functions, identity, tmp_path) as outcomes:
        noisy = await alice.call("crew:demo", "noisy", {"text": "x"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
        failing = await alice.call("crew:demo", "nulfail", {"text": "x"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "failed"
    status = await alice.get_status(noisy.call_id)
    assert state_name(status.status) == "completed" and status.answer == "hello\ufffdworld"
    assert [m.text for m in status.messages] == [
        "reading x",
        "L" * 16384 + " [... line cut: 100000 bytes in all]",
        "M" * 16384 + " [... line cut: 70000 bytes in all]",
        "tab\ufffdbed",
        "hello\ufffdworld",
    ]
    status = await alice.get_status(failing.call_id)
    assert state_name(status.status) == "failed"
    assert status.error.endswith("exited with status 1: bad\ufffdthing"), status.error


async def test_runner_uploads_every_file_the_service_accepts_and_names_the_rest_R2_F10(
    functions, identity, alice, tmp_path
):
    """R2 F10: files whose names the service refuses (a backslash, a newline) are skipped
    and named with the reason in a runner message; the others are uploaded and the call
    completes."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "files", {"text": "x"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
    status = await alice.get_status(receipt.call_id)
    assert (state_name(status.status), status.answer) == ("completed", "made files")
    assert {f.name for f in status.files} == {"a.txt", "z/last.txt"}
    (note,) = [m.text for m in status.messages if m.role == "runner"]
    assert note.startswith("2 of 4 files in the output folder were not uploaded: ")
    assert "'back\\\\slash.txt'" in note and "'new\\nline.txt'" in note, note
    assert "is not a path inside the call's output folder" in note


async def test_runner_uploads_up_to_the_file_limit_result_first_and_says_what_it_skipped_R2_F10(
    functions, identity, alice, tmp_path
):
    """R2 F10: past the 500 files a call keeps, the runner uploads result.json and the
    first 499 others, names the skipped ones in a runner message, and completes."""
    async with runner(functions, identity, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", "many", {"text": "503"})
        assert (await asyncio.wait_for(outcomes.get(), 120)).status == "completed"
    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "completed" and call_result(status) == {
        "summary": "many",
        "words": 0,
    }
    assert len(status.files) == 500 and "result.json" in {f.name for f in status.files}
    (note,) = [m.text for m in status.messages if m.role == "runner"]
    assert note == (
        "4 of 504 files in the output folder were not uploaded: 'f499.txt', 'f500.txt', "
        "'f501.txt', 'f502.txt': the call already has 500 files, the most it can keep"
    )


@pytest.mark.reliability(
    scenario="Leftovers in the shared project root, from a call (B4)",
    action="a call's command runs `ln -s /usr` at $AGENTWORKS_PROJECT_ROOT/.turns, "
    ".agentworks and .calls (the root writable by the sandbox's user)",
    check="each is refused (the runner's folders are mount points in every sandbox); the "
    "next call of the same target completes",
)
async def test_a_call_cannot_leave_links_that_break_the_next_call_B4(
    functions, identity, alice, tmp_path
):
    """B4: the links a command tries to leave where the runner mounts are refused, and the
    next execution of the target runs (it failed in bubblewrap before: a tmpfs mounted
    through the link over /usr, or on a dangling one)."""
    (tmp_path / "project").mkdir(mode=0o777)
    (tmp_path / "project").chmod(0o777)  # a project the commands may write in
    async with runner(functions, identity, tmp_path) as outcomes:
        planting = await alice.call("crew:demo", "plant", {"text": "x"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
        receipt = await alice.call("crew:demo", "ok", {"text": "after"})
        assert (await asyncio.wait_for(outcomes.get(), 30)).status == "completed"
    lines = [m.text for m in (await alice.get_status(planting.call_id)).messages]
    assert lines[1:] == [
        f"refused {name} FileExistsError" for name in (".turns", ".agentworks", ".calls")
    ]
    status = await alice.get_status(receipt.call_id)
    assert call_result(status) == {"summary": "AFTER", "words": 1}
    for name in (".turns", ".agentworks", ".calls"):
        assert (tmp_path / "project" / name).is_dir() and not (
            tmp_path / "project" / name
        ).is_symlink()


@pytest.mark.reliability(
    scenario="Upload floods: thousands of refused files (B4, B10)",
    action="a command leaves 3,000 symbolic links and a FIFO beside one plain file, ok.txt",
    check="ok.txt is uploaded; one `runner` message and one `files_skipped` event say how "
    "many were skipped per reason with a few names (bounded); one log line, not one per file",
)
async def test_skipped_files_are_summed_up_in_one_event_and_a_plain_file_is_uploaded_B4_B10(
    functions, identity, alice, tmp_path
):
    """B4 B10: every skipped file is counted under its reason in one summary (a runner
    message and a `files_skipped` event on the call, a few names each, bounded), one log
    line says the same, and the plain file beside them is uploaded."""
    with structlog.testing.capture_logs() as logs:
        async with runner(functions, identity, tmp_path) as outcomes:
            receipt = await alice.call("crew:demo", "litter", {"text": "3000"})
            assert (await asyncio.wait_for(outcomes.get(), 60)).status == "completed"
    status = await alice.get_status(receipt.call_id)
    assert {f.name for f in status.files} == {"ok.txt"}
    assert await alice.read_file_bytes(receipt.call_id, "ok.txt") == b"fine"
    (note,) = [m.text for m in status.messages if m.role == "runner"]
    assert note.startswith("3001 of 3002 files in the output folder were not uploaded: ")
    assert "'link00004' and 2995 more: a symbolic link: only regular files" in note, note
    assert "'pipe': a FIFO (named pipe): only regular files are uploaded" in note, note
    assert len(note.encode()) < 2048
    (event,) = [e for e in status.events if e.kind == "files_skipped"]
    summary = json.loads(event.text)
    assert (summary["skipped"], summary["files"]) == (3001, 3002)
    links, fifo = summary["reasons"]
    assert (links["count"], len(links["examples"]), fifo["count"]) == (3000, 5, 1)
    assert links["reason"] == "a symbolic link: only regular files are uploaded"
    skipped_lines = [e for e in logs if "skipped" in e["event"]]
    assert [e["event"] for e in skipped_lines] == ["execution.files_skipped"], skipped_lines[:3]
    assert skipped_lines[0]["skipped"] == 3001


def test_commands_are_validated_and_loaded_from_json_R2(tmp_path):
    """R2: commands map function names to argv lists (run as they are) or strings (run
    by /bin/sh -c); bad ones are refused."""
    assert parse_commands({"a": "echo 'hi there'; exit 3", "b": ["ls", "-l"]}) == {
        "a": ("/bin/sh", "-c", "echo 'hi there'; exit 3"),
        "b": ("ls", "-l"),
    }
    path = tmp_path / "commands.json"
    path.write_text(json.dumps({"hello": ["echo", "hello"]}))
    assert load_commands(str(path)) == {"hello": ("echo", "hello")}
    assert load_commands('{"x": "true"}') == {"x": ("/bin/sh", "-c", "true")}
    bad: dict[str, Any]
    for bad in ({}, {"a": ""}, {"a": "  "}, {"a": [1]}, {"a": []}):
        with pytest.raises(ValueError):
            parse_commands(bad)


def test_a_command_never_sees_the_runners_key_or_database_addresses_A3_R2(monkeypatch, tmp_path):
    """A3 R2: a command's environment is the runner's without its secrets (where the key
    that signs its identities is, the webhook key, database addresses): a command that
    prints its environment would show them to its caller. Other variables and the
    configured `env` pass through."""
    secrets = {
        "AGENTWORKS_SIGNING_KEY": "/keys/the-key.pem",
        "AGENTWORKS_RUNTIME_CREDENTIAL": "awr_the-runtime-credential",
        "AGENTWORKS_RUNTIME_CREDENTIAL_FILE": "/keys/runtime-credential",
        "FUNCTIONS_SIGNING_KEY": "/keys/its-key.pem",
        "SCHEDULER_WEBHOOK_KEY": "the-webhook-key",
        "DATABASE_URL": "postgresql://aw:s3cret@db/x",
        "MESSAGING_DATABASE_URL": "postgresql://aw:s3cret@db/m",
        "AGENTWORKS_TOKEN": "aw_token",
    }
    for name, value in {**secrets, "OPENAI_API_KEY": "meant-for-tools"}.items():
        monkeypatch.setenv(name, value)
    execution = f.Execution(call_id="c-1", function="f", caller="user:alice")
    execution.target.CopyFrom(target_ref("crew:demo"))
    ctx = ExecutionContext(execution, client=None, root=tmp_path, log=None)  # type: ignore[arg-type]
    runner = CommandRunner({"f": ["env"]}, env={"EXTRA": "1"})
    env = runner.environment(ctx)
    assert not set(secrets) & set(env), sorted(set(secrets) & set(env))
    assert "s3cret" not in json.dumps(env) and "the-key" not in json.dumps(env)
    assert "the-webhook-key" not in json.dumps(env)
    assert (env["OPENAI_API_KEY"], env["EXTRA"]) == ("meant-for-tools", "1")
    assert (env["AGENTWORKS_CALL_ID"], env["AGENTWORKS_TARGET"]) == ("c-1", "crew:demo")


async def start_cli_runner(
    functions,
    signing_keys: KeyDirectory,
    tmp_path: pathlib.Path,
    modes: tuple[str, ...],
    *,
    hook: str = "",
    **env: str,
) -> asyncio.subprocess.Process:
    """`agentworks-runtime run-commands` for crew:demo, in its own process, serving
    `modes` in tmp_path/project; its output (stdout and stderr) piped. A `hook` (Python
    code) runs in that process first, before the CLI's `main`."""
    script = tmp_path / "command.py"
    script.write_text(COMMAND)
    commands = json.dumps(
        {
            "commands": {m: [sys.executable, str(script), m] for m in modes},
            "read_only": list(visible(script).read_only),
        }
    )
    program = [str(pathlib.Path(sys.executable).parent / "agentworks-runtime")]
    if hook:
        main = "import sys\nfrom agentworks.runner.cli import main\nsys.exit(main(sys.argv[1:]))"
        program = [sys.executable, "-c", f"{hook}\n{main}"]
    return await asyncio.create_subprocess_exec(
        *program,
        "run-commands",
        "--commands",
        commands,
        "--root",
        str(tmp_path / "project"),
        "--target",
        "crew:demo",
        "--functions-address",
        functions.address,
        env={
            **os.environ,
            **signing_keys.env("gateway"),
            "AGENTWORKS_RUNTIME_PRINCIPAL": "agent:demo/runner",
            "AGENTWORKS_RUNTIME_WAIT_SECONDS": "2",
            "LOG_JSON": "false",
            **env,
        },
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def test_run_commands_cli_serves_calls_until_sigterm_R2_R1_F4(
    functions, signing_keys, alice, tmp_path
):
    """R2/R1/F4: `agentworks-runtime run-commands --commands JSON --root DIR --target crew:x`
    runs each call's command in ROOT/.calls/<call_id>/; SIGTERM stops it cleanly (exit 0)."""
    root = tmp_path / "project"
    process = await start_cli_runner(functions, signing_keys, tmp_path, ("ok",))
    try:
        receipt = await alice.call("crew:demo", "ok", {"text": "cli"})
        status = await alice.wait(receipt.call_id, timeout=30)
        assert state_name(status.status) == "completed" and status.answer == "all done", status
        assert call_result(status) == {"summary": "CLI", "words": 1}
        assert (root / ".calls" / receipt.call_id / "out" / "report.txt").exists()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 15)
    assert process.returncode == 0, output.decode()
    assert b"worker.stopped" in output


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (an orphan's zombie may wait for
    an init that does not reap it)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] != b"Z"


def children(pid: int) -> dict[int, bytes]:
    """The processes whose parent is `pid`, with their command lines."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_bytes()
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes()
    return found


def records_of(root: pathlib.Path, call_id: str) -> list[int]:
    """The process groups the runners' records under `root` name for `call_id`."""
    return [
        record["pgid"]
        for path in (root / RECORDS_FOLDER).glob("*.json")
        if (record := json.loads(path.read_text()))["call_id"] == call_id
    ]


def in_host(root: pathlib.Path, call_id: str, pids: list[int]) -> list[int | None]:
    """The host pids of processes `pids` as the command saw them in its sandbox (its
    own PID namespace), found below the sandbox its running record names; None for one
    that is gone."""
    (top,) = records_of(root, call_id)
    found = {}
    for pid in [top, *descendants(top)]:  # without a sandbox, `top` is the leader
        with contextlib.suppress(OSError, ValueError):
            for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    found[int(line.split()[-1])] = pid
    return [found.get(pid) for pid in pids]


async def started_tree(alice, root: pathlib.Path) -> tuple[str, list[int]]:
    """Call `tree` and wait until its command runs: (call_id, [leader pid, child pid])."""
    receipt = await alice.call("crew:demo", "tree", {"text": "x"})
    pids_file = root / ".calls" / receipt.call_id / "pids"
    await until(pids_file.exists, 30, what="the command to start")
    # The command may write its pids before its runner has recorded it: wait for both.
    await until(lambda: records_of(root, receipt.call_id), 10, what="a running record")
    inner = [int(pid) for pid in pids_file.read_text().split()]
    pids = [pid for pid in in_host(root, receipt.call_id, inner) if pid is not None]
    assert len(pids) == 2 and all(running(pid) for pid in pids)
    assert {os.getpgid(pid) for pid in pids} == {pids[0]}  # one group, the leader's
    return receipt.call_id, pids


def kill_all(pids: list[int], processes: list[asyncio.subprocess.Process]) -> None:
    """Cleanup: SIGKILL whatever of a test's processes still runs."""
    for process in processes:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
    for pid in pids:
        if running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard needs /proc")
@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: command runner killed (R2, F12)",
    action="SIGKILL to a `run-commands` runner while its command (a leader and its child, "
    "one process group) runs",
    check="the runner's watchdog kills the whole group within the kill grace, without a "
    "runner starting again; the command's record is removed; the call ends `interrupted`",
)
async def test_a_command_dies_soon_after_its_runner_is_killed_with_sigkill_R2_F12(
    functions, signing_keys, alice, tmp_path
):
    """R2 F12: `kill -9` of a runner -> its watchdog kills the running command's whole
    process group (the leader and its child) within the kill grace, without waiting for
    a runner to start again, and removes the record; the call ends `interrupted`."""
    root = tmp_path / "project"
    pids: list[int] = []
    process = await start_cli_runner(
        functions, signing_keys, tmp_path, ("tree",), AGENTWORKS_RUNTIME_LEASE_SECONDS="5"
    )
    try:
        call_id, pids = await started_tree(alice, root)
        (record,) = (root / RECORDS_FOLDER).iterdir()
        # The record names the process group of the command's sandbox (bubblewrap).
        assert pids[0] in descendants(json.loads(record.read_text())["pgid"])
        process.kill()
        await process.communicate()
        await until(
            lambda: not any(running(pid) for pid in pids), 15, what=f"the end of processes {pids}"
        )
        await until(lambda: not record.exists(), 5, what="the record's removal")
        status = await alice.wait(call_id, timeout=30)
        assert state_name(status.status) == "interrupted" and not status.files
    finally:
        kill_all(pids, [process])
        await process.communicate()


# A hook for start_cli_runner: on SIGUSR1 the runner forks a child that sleeps on (and
# outlives it), its pid written to the file named by FORKED_PID_FILE. The child lets go
# of the runner's output, so the runner's end is seen when it dies.
FORK_ON_SIGUSR1 = textwrap.dedent(
    """
    import os, pathlib, signal, time

    def fork(signum, frame):
        child = os.fork()
        if child == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            time.sleep(600)
            os._exit(0)
        path = pathlib.Path(os.environ["FORKED_PID_FILE"])
        path.with_suffix(".tmp").write_text(str(child))
        path.with_suffix(".tmp").rename(path)

    signal.signal(signal.SIGUSR1, fork)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard needs /proc")
@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: command runner killed, a child it forked alive (R2, F12)",
    action="SIGKILL to a `run-commands` runner that forked a child (which lives on) while "
    "its command runs",
    check="the runner's watchdog still kills the command's process group within the kill "
    "grace: the forked child closed its copy of the watchdog's pipe",
)
async def test_a_command_dies_with_its_killed_runner_though_a_child_it_forked_lives_R2_F12(
    functions, signing_keys, alice, tmp_path
):
    """R2 F12: a child the runner forks (os.fork, multiprocessing) closes its copy of the
    watchdog's pipe at once, so `kill -9` of the runner still ends that pipe and the
    watchdog kills the running command's process group while the forked child lives on."""
    root = tmp_path / "project"
    forked_file = tmp_path / "forked"
    pids: list[int] = []
    forked: list[int] = []
    process = await start_cli_runner(
        functions,
        signing_keys,
        tmp_path,
        ("tree",),
        hook=FORK_ON_SIGUSR1,
        FORKED_PID_FILE=str(forked_file),
    )
    try:
        _, pids = await started_tree(alice, root)
        # The runner holds the watchdog's pipe (the watchdog runs) before it forks.
        await until(
            lambda: any(b"_watchdog" in cmd for cmd in children(process.pid).values()),
            5,
            what="the runner's watchdog",
        )
        process.send_signal(signal.SIGUSR1)
        await until(forked_file.exists, 5, what="the runner to fork")
        forked.append(int(forked_file.read_text()))
        process.kill()
        await process.communicate()
        await until(
            lambda: not any(running(pid) for pid in pids), 10, what=f"the end of processes {pids}"
        )
        assert running(forked[0]), "the forked child should outlive its runner"
    finally:
        kill_all(pids + forked, [process])
        await process.communicate()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard needs /proc")
def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (its SigCgt mask in /proc)."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: command runner and its watchdog killed (R2, F12)",
    action="SIGKILL to the watchdog and then the runner while a command runs; the command "
    "is shown still running; a second runner starts on the same root",
    check="the second runner kills the orphaned process group at start (found by its "
    "record, the leader checked by its start time) and removes the record",
)
async def test_orphaned_command_is_killed_when_runner_restarts_R2_F12(
    functions, signing_keys, alice, tmp_path
):
    """R2 F12: a runner killed together with its watchdog leaves its command running;
    the next runner on the same root kills that process group at start (found through
    the record under .calls/.runner/, the leader checked by its start time) and removes
    the record."""
    root = tmp_path / "project"
    pids: list[int] = []
    # Without a sandbox: a sandboxed command ends with its runner even when the watchdog
    # is gone (bubblewrap's --die-with-parent; tests/test_isolation.py), so no orphan.
    no_sandbox = {"AGENTWORKS_RUNTIME_SANDBOX": "none"}
    processes = [await start_cli_runner(functions, signing_keys, tmp_path, ("tree",), **no_sandbox)]
    try:
        _, pids = await started_tree(alice, root)
        first = processes[0]
        (watchdog,) = [p for p, cmd in children(first.pid).items() if b"_watchdog" in cmd]
        os.kill(watchdog, signal.SIGKILL)
        await until(lambda: not running(watchdog), 5, what="the watchdog's end")
        first.kill()
        await first.communicate()
        await asyncio.sleep(1)
        assert all(running(pid) for pid in pids), "the orphan should outlive both here"

        processes.append(
            await start_cli_runner(functions, signing_keys, tmp_path, ("tree",), **no_sandbox)
        )
        await until(
            lambda: not any(running(pid) for pid in pids), 20, what=f"the end of processes {pids}"
        )
        # The sweep removes the record once the group is gone (a moment after).
        records = root / RECORDS_FOLDER
        await until(lambda: not list(records.iterdir()), 5, what=f"no record left in {records}")
        second = processes[1]
        # SIGTERM once its handler is in place (before, it would just end the process).
        await until(lambda: _catches_sigterm(second.pid), 10, what="the runner's handler")
        second.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(second.communicate(), 15)
        assert second.returncode == 0, output.decode()
        assert b"command.orphan_killed" in output and str(pids[0]).encode() in output
    finally:
        kill_all(pids, processes)
        for process in processes:
            await process.communicate()


@pytest.fixture
def orphan(tmp_path):
    """A command a runner left running (a sleeper leading its own process group) and a
    writer of its records in tmp_path/.calls/.runner/: (the sleeper, record).

    `record(name, **fields)` writes the record `name` of the sleeper's group, its runner
    this process (alive); `runner_gone=True` records another runner start time (a runner
    gone), `pid_reused=True` another leader start time (its pid given out again), and
    other fields are written as given."""
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    try:
        folder = tmp_path / RECORDS_FOLDER
        folder.mkdir(parents=True)
        start = _watchdog.start_time(sleeper.pid)
        me = _watchdog.start_time(os.getpid())
        assert start is not None and me is not None

        def record(
            name: str, *, runner_gone: bool = False, pid_reused: bool = False, **fields: object
        ) -> None:
            (folder / f"{name}.json").write_text(
                json.dumps(
                    {
                        "pgid": sleeper.pid,
                        "start": start + 1 if pid_reused else start,
                        "runner_pid": os.getpid(),
                        "runner_start": me + 1 if runner_gone else me,
                        "call_id": name,
                        **fields,
                    }
                )
            )

        yield sleeper, record
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard needs /proc")
def test_orphan_sweep_spares_live_runners_and_pids_given_out_again_R2(orphan, tmp_path):
    """R2: the startup sweep leaves alone a record whose runner is alive (another runner
    on the root) and a group whose leader did not start at the recorded time (its pid
    given out again); it kills the recorded group of a runner that is gone."""
    sleeper, record = orphan
    folder = tmp_path / RECORDS_FOLDER
    record("live")  # this process's: a live runner
    record("reused", runner_gone=True, pid_reused=True)  # a runner gone; its leader's pid reused
    assert reap_orphans(tmp_path, grace=1) == []
    assert sleeper.poll() is None
    assert [p.name for p in folder.iterdir()] == ["live.json"]  # the stale one went
    record("dead", runner_gone=True)  # a runner gone; its command still running
    assert reap_orphans(tmp_path, grace=1) == [sleeper.pid]
    assert sleeper.wait(5) == -signal.SIGTERM
    assert [p.name for p in folder.iterdir()] == ["live.json"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sweep needs /proc")
def test_orphan_sweep_removes_other_boots_and_spares_other_pid_namespaces_R2(orphan, tmp_path):
    """R2: a record written in another boot is removed without any kill (nothing of it
    can run); one from another pid namespace (same boot) is left alone, its group not
    killed, though its runner looks gone from here."""
    boot, namespace = _watchdog.boot_id(), _watchdog.pid_namespace()
    if boot is None or namespace is None:
        pytest.skip("needs /proc")
    sleeper, record = orphan
    folder = tmp_path / RECORDS_FOLDER
    # Each runner looks gone from here.
    record("other-boot", runner_gone=True, boot_id=boot + "-not", pid_ns=namespace)
    record("other-ns", runner_gone=True, boot_id=boot, pid_ns=namespace + 1)
    assert reap_orphans(tmp_path, grace=1) == []
    assert sleeper.poll() is None
    assert [p.name for p in folder.iterdir()] == ["other-ns.json"]
    assert reap_orphans(tmp_path, grace=1) == []
    assert sleeper.poll() is None
    # This boot and namespace: a runner gone.
    record("this-one", runner_gone=True, boot_id=boot, pid_ns=namespace)
    assert reap_orphans(tmp_path, grace=1) == [sleeper.pid]
    assert sleeper.wait(5) == -signal.SIGTERM
    assert [p.name for p in folder.iterdir()] == ["other-ns.json"]


def test_run_commands_cli_refuses_bad_commands_R2(tmp_path, capsys, signing_keys):
    """R2: a missing or malformed commands file is refused before anything starts (exit 2)."""
    from agentworks.runner.cli import main

    env_key = {**signing_keys.env("gateway"), "AGENTWORKS_RUNTIME_PRINCIPAL": "agent:x/y"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env_key.items():
            patch.setenv(name, value)
        missing = str(tmp_path / "missing.json")
        assert main(["run-commands", "--commands", missing, "--target", "crew:x"]) == 2
        assert main(["run-commands", "--commands", "{}", "--target", "crew:x"]) == 2
    err = capsys.readouterr().err
    assert "missing.json" in err and "no commands configured" in err
