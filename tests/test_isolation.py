"""The isolation suite (T6, T7, T8): the real command runner and the real sandbox
(bubblewrap), each command written the way an attacker would write it.

Every test runs a runner on crew:demo (in-process, or the `run-commands` CLI) with small
limits (`tests.fixtures.isolation.LIMITS`) and asserts what the attacker got: nothing of
the suite's keys, of other calls, of the runner or of the database; no process left
behind; the call failed naming the limit it passed while another call on the same
runtime completed; refused files not uploaded, each said why; and no runner without a
sandbox unless told `--sandbox none`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import signal
import stat
import uuid

import psycopg
import pytest

from agentworks.agents.agent_mcp import handout
from agentworks.client.functions import state_name
from agentworks.runner.cgroups import Cgroups
from agentworks.runner.limits import KIB, Policy
from agentworks.runner.watch import RUNNER_FILES, TICK_SECONDS
from agentworks.runtime import capability_file
from agentworks.server.testing import until
from tests.fixtures.functions import clients, functions, operator, owner  # noqa: F401
from tests.fixtures.isolation import (
    LIMITS,
    declare,
    ended,
    messages,
    processes_with,
    python,
    serving,
    start_cli,
    started,
    stop,
)

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only")

FUNCTIONS = ("snoop", "keep", "peek", "socket", "leave", "work", "attack", "dial", "files")


@pytest.fixture
async def alice(clients, operator, owner):  # noqa: F811 - the fixtures imported above
    await declare(operator, owner, "crew:demo", FUNCTIONS)
    return await clients("user:alice")


async def texts(alice, call_id: str) -> list[str]:
    return [text for _, text in await messages(alice, call_id)]


async def note(alice, call_id: str) -> str:
    """The one `runner` message of the call (the files it did not upload)."""
    (text,) = [text for role, text in await messages(alice, call_id) if role == "runner"]
    return text


# Tries each path it was told of, then every process's environment it can see.
SNOOP = """
import json, os
for path in json.loads(os.environ["AGENTWORKS_INPUTS"])["paths"]:
    try:
        with open(path, "rb") as file:
            print("READ", path, file.read().decode(errors="replace"))
    except OSError as exc:
        print("denied", path, type(exc).__name__)
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print("processes", len(pids))
for pid in pids:
    try:
        for variable in open(f"/proc/{pid}/environ", "rb").read().split(b"\\0"):
            print("environ", pid, variable.decode(errors="replace"))
    except OSError as exc:
        print("denied environ", pid, type(exc).__name__)
print("listing", sorted(os.listdir(os.environ["AGENTWORKS_PROJECT_ROOT"] + "/.agentworks")))
"""


async def test_an_execution_reads_neither_the_suites_key_nor_the_dev_token_nor_the_runner_T6(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
    monkeypatch,
):
    """T6: the keys and dev token in the suite's home (AGENTWORKS_HOME, and a
    `.agentworks` inside the project root), /proc/<runner pid>/environ and cmdline: not
    there, nor the runner's own key file left inside the project root; the
    sandbox's /proc shows only its own few processes, whose environments hold none of
    the runner's secrets."""
    key, token = f"key-{uuid.uuid4()}", f"aw_{uuid.uuid4().hex}"
    home, root = tmp_path / "home", tmp_path / "project"
    for folder in (home, root / ".agentworks"):
        folder.mkdir(parents=True)
        (folder / "signing-key.pem").write_text(key)
        (folder / "cli.json").write_text(json.dumps({"token": token}))
    # The runner's own key file where an operator might leave it, in the project root,
    # and readable (0644) by anyone: the sandbox hides it.
    (root / "keys").mkdir()
    (root / "keys" / "runtime.pem").write_text(key)
    (root / "keys" / "runtime.pem").chmod(0o644)
    monkeypatch.setenv("AGENTWORKS_HOME", str(home))
    monkeypatch.setenv("AGENTWORKS_SIGNING_KEY", str(root / "keys" / "runtime.pem"))
    monkeypatch.setenv("AGENTWORKS_TOKEN", token)  # secrets of the runner's environment
    runner = os.getpid()
    files = ("signing-key.pem", "cli.json")
    paths = [
        *(str(p / n) for p in (home, root / ".agentworks") for n in files),
        f"/proc/{runner}/environ",
        f"/proc/{runner}/cmdline",
        "/etc/shadow",
        str(root / "keys" / "runtime.pem"),
    ]
    async with serving(functions, identity, root, {"snoop": python(SNOOP)}):
        receipt = await alice.call("crew:demo", "snoop", {"paths": paths})
        status = await ended(alice, receipt.call_id)
    assert state_name(status.status) == "completed", status.error
    lines = await texts(alice, receipt.call_id)
    assert not [line for line in lines if key in line or token in line]
    for path in paths:
        assert any(line.startswith(f"denied {path} ") for line in lines), (path, lines)
    (count,) = [int(line.split()[1]) for line in lines if line.startswith("processes ")]
    assert count <= 3, lines  # bubblewrap's init, the sandbox's init, this command
    assert "listing []" in lines


KEEP = """
import json, os, pathlib, time
secret = json.loads(os.environ["AGENTWORKS_INPUTS"])["secret"]
pathlib.Path("secret.txt").write_text(secret)
root = pathlib.Path(os.environ["AGENTWORKS_PROJECT_ROOT"])
(root / "MEMORY.md").write_text("memory from " + os.environ["AGENTWORKS_CALL_ID"])
print("ready", flush=True)
time.sleep(30)
"""
PEEK = """
import json, os, pathlib
other = json.loads(os.environ["AGENTWORKS_INPUTS"])["other"]
root = pathlib.Path(os.environ["AGENTWORKS_PROJECT_ROOT"])
try:
    print("READ", (root / ".calls" / other / "secret.txt").read_text())
except OSError as exc:
    print("denied", type(exc).__name__)
print("calls", sorted(os.listdir(root / ".calls")))
print("shared", (root / "MEMORY.md").read_text())
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    print("process", open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
"""


async def test_an_execution_sees_neither_another_calls_folder_nor_its_processes_T6(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T6: while call A runs, call B cannot read A's `.calls/<A>/` (its `.calls` holds only
    its own folder) nor see A's processes, yet reads what A wrote in the project root,
    which the calls share."""
    root = tmp_path / "project"
    root.mkdir()
    if os.geteuid() == 0:
        os.chown(root, 65534, 65534)  # the sandbox user may write the project root
    secret = f"secret-{uuid.uuid4()}"
    async with serving(functions, identity, root, {"keep": python(KEEP), "peek": python(PEEK)}):
        first = await alice.call("crew:demo", "keep", {"secret": secret})
        await started(alice, first.call_id)
        second = await alice.call("crew:demo", "peek", {"other": first.call_id})
        status = await ended(alice, second.call_id)
        await alice.cancel(first.call_id)
        await ended(alice, first.call_id)
    assert (root / ".calls" / first.call_id / "secret.txt").read_text() == secret
    assert state_name(status.status) == "completed", status.error
    lines = await texts(alice, second.call_id)
    assert "denied FileNotFoundError" in lines and not [s for s in lines if secret in s]
    assert f"calls {[second.call_id]}" in lines
    assert f"shared memory from {first.call_id}" in lines
    assert not [line for line in lines if "KEEP" in line or "time.sleep(30)" in line]


SOCKET = """
import json, os, socket
folder, port = json.loads(os.environ["AGENTWORKS_INPUTS"])["socket"]
for attempt in ("socket", "listing"):
    try:
        if attempt == "socket":
            client = socket.socket(socket.AF_UNIX)
            client.connect(f"{folder}/.s.PGSQL.{port}")
            print("connected to PostgreSQL")
        else:
            print("listed", os.listdir(folder))
    except OSError as exc:
        print("denied", attempt, type(exc).__name__)
"""


async def test_an_execution_cannot_reach_postgresql_by_its_unix_socket_T6(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
    database_url,
):
    """T6: the database's socket directory does not exist in the sandbox: connecting
    to PostgreSQL's unix socket (the embedded server trusts it) fails."""
    params = psycopg.conninfo.conninfo_to_dict(database_url)
    folder, port = str(params.get("host") or ""), str(params.get("port") or 5432)
    if not folder.startswith("/"):
        pytest.skip("the test database is not reached through a unix socket")
    assert stat.S_ISSOCK(os.stat(f"{folder}/.s.PGSQL.{port}").st_mode)
    async with serving(functions, identity, tmp_path / "project", {"socket": python(SOCKET)}):
        receipt = await alice.call("crew:demo", "socket", {"socket": [folder, port]})
        status = await ended(alice, receipt.call_id)
    assert state_name(status.status) == "completed", status.error
    assert await texts(alice, receipt.call_id) == [
        "denied socket FileNotFoundError",
        "denied listing FileNotFoundError",
    ]


async def test_processes_left_behind_with_setsid_or_a_double_fork_end_with_the_call_T6(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T6: a command that leaves processes behind (`setsid`, a double fork, `nohup`),
    their output redirected so the call ends at once: when the call has ended, none of
    them runs."""
    mark = f"{uuid.uuid4().int % 10**6:06d}"
    leave = (
        f"setsid sleep 300.{mark} >/dev/null 2>&1 < /dev/null &"
        f" (sleep 301.{mark} >/dev/null 2>&1 &) ;"
        f" nohup sleep 302.{mark} >/dev/null 2>&1 &"
        " sleep 0.3; echo left"
    )
    async with serving(functions, identity, tmp_path / "project", {"leave": leave}):
        receipt = await alice.call("crew:demo", "leave", {})
        status = await ended(alice, receipt.call_id)
        assert state_name(status.status) == "completed" and status.answer == "left"
        await until(lambda: not sleeping(mark), 5, what="the sleepers are gone")


def sleeping(mark: str) -> list[int]:
    """The `sleep 30N.<mark>` processes running on the host (not the commands that
    started them, whose command lines hold the same text)."""
    return [pid for n in range(5) for pid in processes_with(f"sleep\0{300 + n}.{mark}")]


async def test_a_sandboxed_command_ends_with_its_killed_runner_even_without_its_watchdog_T6(
    functions,  # noqa: F811
    signing_keys,
    alice,
    tmp_path,
):
    """T6: `kill -9` of the watchdog, then of the runner: the command (and what it left in
    a session of its own) still ends at once, with its sandbox (--die-with-parent)."""
    mark = f"{uuid.uuid4().int % 10**6:06d}"
    command = f"setsid sleep 303.{mark} >/dev/null 2>&1 & echo started; exec sleep 304.{mark}"
    process = await start_cli(functions, signing_keys, tmp_path / "project", {"leave": command})
    try:
        receipt = await alice.call("crew:demo", "leave", {})
        await started(alice, receipt.call_id)
        await until(lambda: len(sleeping(mark)) == 2, 5, what="two sleepers run")
        watchdogs = [p for p in processes_with("_watchdog.py") if str(process.pid) in _args(p)]
        assert len(watchdogs) == 1
        os.kill(watchdogs[0], signal.SIGKILL)
        process.kill()
        await process.communicate()
        await until(lambda: not sleeping(mark), 5, what="the sleepers are gone")
    finally:
        await stop(process)


def _args(pid: int) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# Each forks while the attack runs next to it, and says it survived.
WORK = {
    "processes": "echo started; for i in 1 2 3 4 5 6 7 8; do sh -c true || exit 9;"
    " sleep 0.25; done; echo survived",
    "memory": python(
        "import time\nprint('started', flush=True)\nkept = b'x' * (16 << 20)\n"
        "time.sleep(2)\nprint('survived')"
    ),
    "output": "echo started; head -c 102400 /dev/zero > mine.bin; sleep 2; echo survived",
}
ATTACKS = {
    "processes": ": bomb-{mark}; echo started; b() {{ b | b & }}; b; wait",
    "memory": python(
        "print('started', flush=True)\nx = []\nwhile True: x.append(b'x' * (4 << 20))"
    ),
    "output": "echo started; i=0; while :; do head -c 262144 /dev/zero > fill$i; i=$((i+1)); done",
}


@pytest.mark.parametrize(
    ("limit", "named"),
    [
        ("processes", "process limit (32 processes and threads at once)"),
        ("memory", "memory limit (64 MiB)"),
        ("output", "output limit (1 MiB in the output folder)"),
    ],
)
async def test_a_fork_bomb_memory_hog_or_disk_filler_fails_naming_the_limit_beside_a_call_T7(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
    limit,
    named,
):
    """T7: a fork bomb, a memory hog, a disk filler -> the call ends `failed` naming the
    limit it passed, with nothing of it left running, while a second call on the same
    runtime, started before it and working beside it (forking, allocating, writing),
    completes."""
    if limit in ("memory", "processes") and not _cgroups(limit):
        # RLIMIT_AS / RLIMIT_NPROC still hold the attack, but the runner names the limit
        # only when it sees it passed, which a short-lived burst may not show.
        pytest.skip(f"no {limit} cgroup can be made here (cgroups.py): kept by an rlimit")
    mark = uuid.uuid4().hex[:12]
    attack = ATTACKS[limit]
    attack = attack.format(mark=mark) if isinstance(attack, str) else attack
    async with serving(
        functions, identity, tmp_path / "project", {"work": WORK[limit], "attack": attack}
    ):
        work = await alice.call("crew:demo", "work", {})
        await started(alice, work.call_id)
        bad = await alice.call("crew:demo", "attack", {})
        failed = await ended(alice, bad.call_id)
        survived = await ended(alice, work.call_id)
    assert state_name(failed.status) == "failed", failed.answer
    assert f"the execution passed its {named}" in failed.error, failed.error
    assert state_name(survived.status) == "completed", survived.error
    assert survived.answer == "survived"
    if limit == "processes":
        assert not processes_with(f"bomb-{mark}")
    if limit == "output":
        assert {f.name for f in survived.files} == {"mine.bin"}


def _cgroups(limit: str) -> bool:
    """Whether the runner can make a cgroup keeping `limit` ("memory", "processes")."""
    cgroups = Cgroups.make(f"{os.getpid()}-probe", memory_bytes=LIMITS.memory_bytes, tasks=99)
    if cgroups is None:
        return False
    cgroups.remove()
    return cgroups.memory if limit == "memory" else cgroups.pids


async def test_wall_time_and_cpu_time_limits_end_a_call_naming_them_T7(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T7: a command sleeping past its wall time and one spinning past its CPU time end
    `failed`, each naming its limit."""
    limits = dataclasses.replace(LIMITS, wall_seconds=3, cpu_seconds=1)
    commands = {
        "work": "echo started; sleep 60",
        "attack": python("print('started', flush=True)\nwhile True: pass"),
    }
    policy = Policy(limits=limits)
    async with serving(functions, identity, tmp_path / "project", commands, policy=policy):
        sleeper = await alice.call("crew:demo", "work", {})
        spinner = await alice.call("crew:demo", "attack", {})
        slept, spun = await ended(alice, sleeper.call_id), await ended(alice, spinner.call_id)
    assert state_name(slept.status) == "failed"
    assert "the execution passed its wall time limit (3 s)" in slept.error, slept.error
    assert state_name(spun.status) == "failed"
    assert "the execution passed its CPU time limit (1 s of CPU)" in spun.error, spun.error


DIAL = """
import os, socket
host, port = os.environ["FUNCTIONS"].rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=3).close()
    print("connected")
except OSError as exc:
    print("no network:", type(exc).__name__)
"""


async def test_network_none_reaches_nothing_and_outbound_reaches_the_network_T7(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T7: with `network: none` a command cannot open a connection (not even to the
    services on this host's loopback); with the default, `outbound`, it can."""
    answers = []
    for network in ("none", "outbound"):
        async with serving(
            functions,
            identity,
            tmp_path / "project",
            {"dial": python(DIAL)},
            policy=Policy(limits=LIMITS, network=network),
            env={"FUNCTIONS": functions.address},
        ):
            receipt = await alice.call("crew:demo", "dial", {})
            answers.append((await ended(alice, receipt.call_id)).answer)
    assert answers[0].startswith("no network:") and answers[1] == "connected", answers


# Leaves a hard link, a symlink, a FIFO and a file not its own (the test plants it).
FILES = (
    "echo mine > own.txt; ln own.txt linked.txt; ln -s /etc/passwd passwd-link;"
    " mkfifo pipe; echo fine > fine.txt; echo started;"
    " n=0; while [ ! -e planted.txt ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done"
)


async def test_links_fifos_and_files_not_its_own_are_not_uploaded_and_said_why_T8(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T8: hard links, a symlink, a FIFO and a file of another user in the output folder
    are not uploaded, and one `runner` message names each with why; the folder and
    `.calls` are 0700; the files of a call past its per-call total are refused."""
    small = Policy(limits=dataclasses.replace(LIMITS, output_bytes=2 * KIB))
    two = "head -c 1536 /dev/zero > a.bin; head -c 1536 /dev/zero > b.bin; echo wrote"
    root = tmp_path / "project"
    async with serving(functions, identity, root, {"files": FILES}):
        receipt = await alice.call("crew:demo", "files", {})
        await started(alice, receipt.call_id)
        folder = root / ".calls" / receipt.call_id
        (folder / "planted.txt").write_text("the operator's")  # as the runner's user
        status = await ended(alice, receipt.call_id)
    assert state_name(status.status) == "completed", status.error
    assert {f.name for f in status.files} == {"fine.txt"}
    said = await note(alice, receipt.call_id)
    refused = 5 if os.geteuid() == 0 else 4  # not root: the sandbox's files are the runner's
    assert said.startswith(f"{refused} of 6 files in the output folder were not uploaded: ")
    assert "'linked.txt', 'own.txt': it has 2 hard links" in said, said
    assert "'passwd-link': a symbolic link" in said and "'pipe': a FIFO" in said, said
    if os.geteuid() == 0:
        assert "'planted.txt': it belongs to uid 0, not to the execution's user (65534)" in said
    assert (folder.stat().st_mode & 0o777, folder.parent.stat().st_mode & 0o777) == (0o700,) * 2

    async with serving(functions, identity, root, {"files": two}, targets={"crew:demo": small}):
        receipt = await alice.call("crew:demo", "files", {})
        status = await ended(alice, receipt.call_id)
    assert "the execution passed its output limit (2 KiB in the output folder)" in status.error
    assert {f.name for f in status.files} == {"a.bin"}
    said = await note(alice, receipt.call_id)
    assert "'b.bin': it would take the call's files past their 512 bytes left" in said, said


async def test_the_runners_own_files_are_not_the_commands_output_T8(
    functions,  # noqa: F811
    identity,
    alice,
    tmp_path,
):
    """T8: the capability and the MCP handout the runner puts in the output folder
    (4 KiB each on disk) are not the command's output: with a 6 KiB output limit, a
    command that writes 1 KiB (4 KiB on disk) and outlives several of the watcher's
    checks completes (it was stopped at the first check, or not, by the machine's
    timing: 12 KiB "written"). The limit still holds for what the command writes: 8 KiB
    more stops it."""
    assert RUNNER_FILES == (capability_file.FILE_NAME, handout.CONFIG_FILE)
    small = Policy(limits=dataclasses.replace(LIMITS, output_bytes=6 * KIB))
    commands = {
        "files": f"head -c 1024 /dev/zero > a.bin; sleep {4 * TICK_SECONDS}; echo wrote",
        "leave": "head -c 8192 /dev/zero > big.bin; sleep 5; echo wrote",
    }
    root = tmp_path / "project"
    async with serving(functions, identity, root, commands, targets={"crew:demo": small}):
        fits = await alice.call("crew:demo", "files", {})
        status = await ended(alice, fits.call_id)
        assert state_name(status.status) == "completed", status.error
        assert {f.name for f in status.files} == {"a.bin"}
        grows = await alice.call("crew:demo", "leave", {})
        status = await ended(alice, grows.call_id)
    assert state_name(status.status) == "failed"
    assert "the execution passed its output limit (6 KiB in the output folder)" in status.error


async def test_the_runner_refuses_to_start_without_bubblewrap_unless_told_sandbox_none_T7(
    functions,  # noqa: F811
    signing_keys,
    tmp_path,
):
    """T7: `run-commands` pointed at a bubblewrap that is not there refuses to start
    (exit 2, saying what to install and what `--sandbox none` gives up); with
    `--sandbox none` it starts, saying so loudly on stderr and in its health file."""
    missing = ("--bwrap", str(tmp_path / "no-such-bwrap"))
    process = await start_cli(
        functions, signing_keys, tmp_path / "project", {"x": "true"}, *missing
    )
    _, err = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2, err
    assert b"refusing to start" in err and b"apt-get install bubblewrap" in err, err
    assert b"--sandbox none" in err

    health = tmp_path / "health"
    process = await start_cli(
        functions,
        signing_keys,
        tmp_path / "project",
        {"x": "true"},
        *missing,
        "--sandbox",
        "none",
        AGENTWORKS_RUNTIME_HEALTH_FILE=str(health),
    )
    try:
        await until(lambda: health.exists() and health.read_text().strip(), 15)
        state = json.loads(health.read_text())
        assert state["sandbox"] == "none" and "WITHOUT a sandbox" in state["gives_up"]
    finally:
        out, err = await stop(process)
    assert process.returncode == 0, err
    assert b"WARNING: --sandbox none: commands run WITHOUT a sandbox" in err
    assert b"sandbox.disabled" in out + err
