"""Cgroups per execution, where the runner may make them (T7).

Memory and the number of processes are best kept by the kernel, over the whole
execution: cgroups of its own, under the runner's own, count every page its processes
use (their `/tmp` included; the OOM killer stops a process there, not elsewhere) and
every task they start (a fork past the limit is refused, and counted). The runner makes
them when it can write its own cgroups' folders: cgroup v1's `memory` and `pids`
hierarchies (`memory.limit_in_bytes`, kills counted in `memory.oom_control`;
`pids.max`, refusals in `pids.events`) or one v2 cgroup with the memory and pids
controllers (`memory.max`, `memory.events`, `pids.max`, `pids.events`) when they are
enabled for the runner's children. Otherwise (no root, a read-only /sys/fs/cgroup, v2
without delegation) there are none and `limits` says what keeps each limit instead. The
sandbox's first process joins them before it starts anything (`Sandbox.argv`), so
nothing in the execution is outside them.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import time

PREFIX = "agentworks-"
CONTROLLERS = ("memory", "pids")


def _own_cgroups() -> dict[str, pathlib.Path]:
    """The runner's own cgroup folder for each of CONTROLLERS that is mounted (v1), or
    its one v2 cgroup under each name; empty when there is none (not Linux)."""
    try:
        mounts = pathlib.Path("/proc/self/mountinfo").read_text().splitlines()
        groups = pathlib.Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return {}
    v1: dict[str, str] = {}
    v2 = None
    for line in groups:
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for name in controllers.split(","):
            if name in CONTROLLERS:
                v1[name] = path
        if number == "0" and controllers == "":
            v2 = path
    found: dict[str, pathlib.Path] = {}
    unified = None
    for line in mounts:
        before, _, after = line.partition(" - ")
        fields, kind = before.split(), after.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        root, point = fields[3], fields[4]
        if kind[0] == "cgroup":
            for name in kind[2].split(","):
                if name in v1 and name not in found:
                    found[name] = pathlib.Path(point) / _relative(v1[name], root)
        elif kind[0] == "cgroup2" and v2 is not None:
            unified = pathlib.Path(point) / _relative(v2, root)
    if not found and unified is not None:
        found = dict.fromkeys(CONTROLLERS, unified)
    return found


def _relative(path: str, mount_root: str) -> str:
    if mount_root != "/" and path.startswith(mount_root):
        path = path[len(mount_root) :]
    return path.lstrip("/")


class Cgroups:
    """One execution's cgroups (`folders`: controller -> its folder, one folder for
    both under v2): made with their limits, joined by the sandbox's first process
    (`procs_files`), read for OOM kills and refused forks, removed at the end."""

    def __init__(self, folders: dict[str, pathlib.Path]) -> None:
        self.folders = folders

    @property
    def procs_files(self) -> list[pathlib.Path]:
        """Writing a pid in each moves that process (and what it starts later) in."""
        return [folder / "cgroup.procs" for folder in dict.fromkeys(self.folders.values())]

    @property
    def memory(self) -> bool:
        return "memory" in self.folders

    @property
    def pids(self) -> bool:
        return "pids" in self.folders

    @classmethod
    def make(cls, name: str, *, memory_bytes: int, tasks: int) -> Cgroups | None:
        """New cgroups `name` under the runner's own, with the limits set; None when the
        runner may make none here. Each controller is kept only if its limit was set."""
        name = PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        limits = {
            "memory": [
                ("memory.limit_in_bytes", str(memory_bytes)),  # v1
                ("memory.memsw.limit_in_bytes", str(memory_bytes)),  # v1, where swap counts
                ("memory.max", str(memory_bytes)),  # v2
                ("memory.swap.max", "0"),  # v2
            ],
            "pids": [("pids.max", str(tasks))],
        }
        folders: dict[str, pathlib.Path] = {}
        made: list[pathlib.Path] = []
        for controller, parent in _own_cgroups().items():
            folder = parent / name
            if folder not in made:
                try:
                    folder.mkdir()
                except OSError:
                    continue
                made.append(folder)
            written = False
            for file, value in limits[controller]:
                with contextlib.suppress(OSError):
                    (folder / file).write_text(value)
                    written = written or file in ("memory.limit_in_bytes", "memory.max", "pids.max")
            if written:
                folders[controller] = folder
        for folder in made:
            if folder not in folders.values():
                _remove(folder, 0)
        return cls(folders) if folders else None

    def _count(self, controller: str, files: tuple[str, ...], key: str) -> int:
        folder = self.folders.get(controller)
        if folder is None:
            return 0
        for name in files:
            try:
                text = (folder / name).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                field, _, value = line.partition(" ")
                if field == key and value.strip().isdigit():
                    return int(value)
        return 0

    def oom_kills(self) -> int:
        """Processes the kernel has killed here for want of memory."""
        return self._count("memory", ("memory.oom_control", "memory.events"), "oom_kill")

    def refused_forks(self) -> int:
        """Forks (and new threads) refused here for the task limit."""
        return self._count("pids", ("pids.events",), "max")

    def remove(self, *, wait: float = 2.0) -> None:
        """Remove the cgroups once their processes are gone (they may take a moment to
        be reaped); one that stays busy is left for `sweep`."""
        for folder in dict.fromkeys(self.folders.values()):
            _remove(folder, wait)


def _remove(folder: pathlib.Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)


def sweep() -> None:
    """Remove the cgroups that runners which are gone left behind (killed before they
    could remove them); busy ones stay."""
    for parent in set(_own_cgroups().values()):
        with contextlib.suppress(OSError):
            for path in parent.glob(PREFIX + "*"):
                pid = path.name[len(PREFIX) :].split("-", 1)[0]
                if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    with contextlib.suppress(OSError):
                        path.rmdir()
