"""What an execution leaves in the shared project root cannot break a later one (B4).

The runner mounts its own folders over the project root in every sandbox: `.calls` (the
calls' folders), `.turns` (the turns') and `.agentworks` (the suite's home). A command
that could leave a link, a file or a FIFO at one of those names made every later
sandbox of the root fail ("bwrap: Can't mount tmpfs on …/.turns: No such file or
directory", or a tmpfs over /usr through a link) until an operator removed it.
These tests run the real sandbox (bubblewrap) on a turn command, no service needed.
"""

from __future__ import annotations

import os
import pathlib
import stat
from types import SimpleNamespace
from typing import cast

import pytest
import structlog

from agentworks.runner.limits import Limits, Policy
from agentworks.runner.sandbox import RUNNER_FOLDERS, own_folders
from agentworks.runner.turn_runner import TurnCommandRunner
from agentworks.runtime import TurnContext

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/ns/pid"), reason="Linux only")

# Tries to leave a link, a file and a FIFO at each name the runner mounts over.
PLANT = """
cd "$AGENTWORKS_PROJECT_ROOT" || exit 9
for name in .calls .turns .agentworks; do
  ln -s /usr "$name" 2>/dev/null; ln -s /nowhere "$name/x" 2>/dev/null
done
ln -s /nowhere .turns 2>/dev/null; mkfifo .agentworks 2>/dev/null
echo planted
"""
SMALL = Policy(limits=Limits(wall_seconds=20, cpu_seconds=5, processes=16))


def turn(turn_id: str) -> TurnContext:
    """What a TurnCommandRunner reads of a turn (`TurnContext`), in its place."""
    return cast(
        TurnContext,
        SimpleNamespace(
            turn_id=turn_id,
            conversation_id="c1",
            target="crew:demo",
            reply_inbox_id="i1",
            capability="",
            deliveries=[],
            log=structlog.get_logger("test"),
        ),
    )


def project(tmp_path: pathlib.Path) -> pathlib.Path:
    """A shared project root the sandbox's user may write in (as commands do)."""
    root = tmp_path / "project"
    root.mkdir()
    root.chmod(0o777)
    return root


def runner(root: pathlib.Path, command: str) -> TurnCommandRunner:
    return TurnCommandRunner(
        {"crew:demo": command}, root=root, policy=SMALL, mcp=False, kill_grace_seconds=1
    )


def real_folders(root: pathlib.Path) -> None:
    for name in RUNNER_FOLDERS:
        found = os.lstat(root / name)
        assert stat.S_ISDIR(found.st_mode), (name, stat.filemode(found.st_mode))


@pytest.mark.reliability(
    scenario="Leftovers in the shared project root (B4)",
    action="a sandboxed command runs `ln -s /usr` (and dangling links, a FIFO) at "
    "$AGENTWORKS_PROJECT_ROOT/.turns, .calls and .agentworks",
    check="nothing is made there (the runner's folders are mount points in every sandbox); "
    "the next command of the same target and root runs",
)
async def test_a_command_cannot_leave_links_where_the_runner_mounts_B4(tmp_path):
    """B4: a turn command that tries to leave links and a FIFO where the runner mounts
    its folders does not break the next turn of the target."""
    root = project(tmp_path)
    planting = runner(root, PLANT)
    await planting(turn("t1"))
    real_folders(root)
    assert list((root / ".agentworks").iterdir()) == []
    checking = runner(root, 'test -x /usr/bin/env && echo "$AGENTWORKS_TURN_ID"')
    await checking(turn("t2"))  # CommandFailed on the old sandbox: /usr hidden by a tmpfs


LEFTOVERS = {
    "link to /usr": lambda path: os.symlink("/usr", path),
    "dangling link": lambda path: os.symlink("/nowhere/at/all", path),
    "file": lambda path: path.write_text("x"),
    "fifo": lambda path: os.mkfifo(path),
}


@pytest.mark.parametrize("name", RUNNER_FOLDERS)
@pytest.mark.parametrize("kind", sorted(LEFTOVERS))
async def test_a_leftover_where_the_runner_mounts_is_replaced_before_the_next_sandbox_B4(
    tmp_path, name, kind
):
    """B4: a link, a file or a FIFO already at `.calls`, `.turns` or `.agentworks` (left
    by a runner without a sandbox, or before this was fixed) is removed without being
    followed and replaced by an empty folder of the runner's; the turn runs."""
    root = project(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("not the runner's")
    LEFTOVERS[kind](root / name)
    await runner(root, "echo fine")(turn("t1"))
    real_folders(root)
    assert (target / "keep.txt").read_text() == "not the runner's"  # not followed


def test_the_runners_folders_are_real_folders_and_a_real_home_is_kept_B4(tmp_path):
    """B4: `own_folders` makes `.calls`, `.turns` and `.agentworks` real folders (0700);
    a link is removed, never what it points to; a real folder is kept as it is."""
    root = tmp_path / "project"
    root.mkdir()
    (root / ".agentworks").mkdir()
    (root / ".agentworks" / "keys").write_text("the suite's")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / ".turns")
    replaced = own_folders(root)
    assert replaced == [".turns (a symbolic link)"]
    real_folders(root)
    assert (root / ".agentworks" / "keys").read_text() == "the suite's"
    assert outside.is_dir() and stat.S_IMODE(os.lstat(root / ".turns").st_mode) == 0o700
    assert own_folders(root) == []
