"""The runner's watch over one running execution: its limits, checked (T7).

Every `TICK_SECONDS` the runner reads, from /proc, the processes of the execution (the
tree below the process it started: in a sandbox every process of the sandbox, whatever
sessions they made, since the sandbox's init adopts orphans) and its output folder, and
compares them with the execution's `Limits`: wall time, CPU time (their user and system
time, with what they waited for), processes and threads at once, the most descriptors
one process holds, resident memory (only when no memory cgroup keeps it), the bytes in
the output folder; and the cgroups' OOM kills and refused forks. The first limit passed is the
answer (`LimitExceeded`); the runner then ends the sandbox at once. When the command
ends, `final` checks once more with what the sandbox's init reported (the command's
own CPU total, a signal such as SIGXCPU or SIGXFSZ), so a limit passed between two
ticks, or that only made a process fail, is still named.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import time
from typing import Any

from agentworks.runner.cgroups import Cgroups
from agentworks.runner.limits import LimitExceeded, Limits, exceeded, size_text

TICK_SECONDS = 0.2
OOM = "the kernel stopped a process that needed more"
REFUSED = "the kernel refused it a new process"
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def children(pid: int) -> list[int]:
    """The direct children of process `pid` (of all its threads)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                text = pathlib.Path(f"/proc/{pid}/task/{task}/children").read_text()
                found.extend(int(child) for child in text.split())
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, breadth first."""
    found: list[int] = []
    pending = children(pid)
    seen = set()
    while pending:
        child = pending.pop(0)
        if child in seen:
            continue
        seen.add(child)
        found.append(child)
        pending.extend(children(child))
    return found


def _stat(pid: int) -> tuple[float, int, int] | None:
    """(CPU seconds with waited-for children, threads, resident bytes) of `pid`."""
    try:
        data = pathlib.Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    # fields[0] is field 3; utime..cstime are fields 14-17, threads 20, rss 24.
    cpu = sum(int(f) for f in fields[11:15]) / _TICKS
    return cpu, int(fields[17]), int(fields[21]) * _PAGE


def _descriptors(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


# The files the runner itself puts in an execution's output folder before its command
# starts: the capability (`agentworks.runtime.capability_file.FILE_NAME`) and the MCP
# endpoint's handout (`agentworks.agents.agent_mcp.handout.CONFIG_FILE`). What they take
# then is not the command's output (`runner_files_bytes`); what they grow by is.
RUNNER_FILES = (".agentworks-capability", ".agentworks-mcp.json")


def _taken(stat: os.stat_result) -> int:
    """What a file takes: the larger of its size and its allocated blocks."""
    return max(stat.st_size, stat.st_blocks * 512)


def runner_files_bytes(folder: pathlib.Path) -> int:
    """What the runner's own files in `folder` take now, counted as `folder_bytes` does."""
    total = 0
    for name in RUNNER_FILES:
        with contextlib.suppress(OSError):
            total += _taken((folder / name).lstat())
    return total


def folder_bytes(folder: pathlib.Path) -> int:
    """What the files under `folder` take: the larger of size and allocated blocks."""
    total = 0
    pending = [folder]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(pathlib.Path(entry.path))
                    else:
                        total += _taken(entry.stat(follow_symlinks=False))
    return total


class Watch:
    """One execution's limits, checked against what /proc and its folder show.

    `top`: the process the runner started. `overhead`: processes of the sandbox itself
    below it (bubblewrap's init and `_sandbox_init.py`), not counted as the command's.
    """

    def __init__(
        self,
        limits: Limits,
        *,
        top: int,
        output_dir: pathlib.Path,
        cgroups: Cgroups | None = None,
        overhead: int = 0,
        allowance: int = 0,
    ) -> None:
        self.limits = limits
        # Bytes in the output folder that are not the command's: the runner's own files
        # as they were when it started (`runner_files_bytes`).
        self.allowance = allowance
        self.top = top
        self.output_dir = output_dir
        self.cgroups = cgroups
        self.overhead = overhead
        self.started = time.monotonic()
        self.exceeded: LimitExceeded | None = None
        self.cpu_seconds = 0.0

    def members(self) -> list[int]:
        """The processes below the one started (in a sandbox: all of the sandbox's)."""
        return descendants(self.top)

    def check(self) -> LimitExceeded | None:
        """The first limit passed now (kept: later checks give the same answer)."""
        if self.exceeded is None:
            self.exceeded = self._check()
        return self.exceeded

    def _check(self) -> LimitExceeded | None:
        limits = self.limits
        elapsed = time.monotonic() - self.started
        if elapsed > limits.wall_seconds:
            return exceeded("wall_seconds", limits)
        if self.cgroups is not None and self.cgroups.oom_kills():
            return exceeded("memory_bytes", limits, OOM)
        if self.cgroups is not None and self.cgroups.refused_forks():
            return exceeded("processes", limits, REFUSED)
        pids = self.members()
        if self.overhead == 0:
            pids.append(self.top)
        cpu = threads = resident = descriptors = 0.0
        top_stat = _stat(self.top)
        if top_stat is not None and self.overhead:
            cpu += top_stat[0]
        for pid in pids:
            stat = _stat(pid)
            if stat is None:
                continue
            cpu += stat[0]
            threads += stat[1]
            resident += stat[2]
            descriptors = max(descriptors, _descriptors(pid))
        self.cpu_seconds = max(self.cpu_seconds, cpu)
        threads -= self.overhead
        if cpu > limits.cpu_seconds:
            return exceeded("cpu_seconds", limits)
        if threads >= limits.processes:
            return exceeded("processes", limits)
        if descriptors >= limits.open_files:
            return exceeded("open_files", limits)
        if not (self.cgroups and self.cgroups.memory) and resident > limits.memory_bytes:
            return exceeded("memory_bytes", limits, f"{size_text(resident)} resident")
        written = folder_bytes(self.output_dir) - self.allowance
        if written > limits.output_bytes:
            return exceeded("output_bytes", limits, f"{size_text(written)} written")
        return None

    def final(self, status: dict[str, Any] | None) -> LimitExceeded | None:
        """After the command ended: a limit passed (seen before, or now), or None.
        `status`: what the sandbox's init reported (`_sandbox_init.py`), if anything."""
        if self.exceeded is not None:
            return self.exceeded
        limits = self.limits
        status = status or {}
        returncode = status.get("returncode")
        found = None
        if self.cgroups is not None and self.cgroups.oom_kills():
            found = exceeded("memory_bytes", limits, OOM)
        elif self.cgroups is not None and self.cgroups.refused_forks():
            found = exceeded("processes", limits, REFUSED)
        elif returncode == -signal.SIGXFSZ:
            found = exceeded("output_bytes", limits, "a file grew past it (SIGXFSZ)")
        elif returncode == -signal.SIGXCPU or (
            max(self.cpu_seconds, float(status.get("cpu_seconds") or 0)) > limits.cpu_seconds
        ):
            found = exceeded("cpu_seconds", limits)
        elif (written := folder_bytes(self.output_dir) - self.allowance) > limits.output_bytes:
            found = exceeded("output_bytes", limits, f"{size_text(written)} written")
        self.exceeded = found
        return found
