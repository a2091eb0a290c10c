"""The command runner's watchdog: kills the commands of a runner that died (R2, F12).

Runs as its own small process, `python -I _watchdog.py RUNNER_PID`, in its own session
(a signal to the runner's process group does not reach it), started by the runner on its
first command. It imports nothing outside the standard library, as it runs isolated
from the runner's environment (`-I`). The runner writes one JSON line to the watchdog's
stdin per change:

    {"track": PGID, "start": TICKS, "grace": SECONDS, "record": PATH}   a command started
    {"untrack": PGID}                                                   it ended

The runner holds the only write end of that pipe (a child it forks closes its copy at
once), so the kernel closes it when the runner exits, however it exits (SIGKILL and
crashes included). The watchdog then reads
end of file, kills every process group still tracked (SIGTERM, then SIGKILL after the
grace), removes their records and exits. No signal, thread or `preexec_fn` is involved.

A process group is only killed while it is provably the one recorded (`is_recorded_group`),
so a pid used again by the system is never hit. The same helpers serve the runner's
sweep of records left by runners that died with their watchdog (`runner.reap_orphans`).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import sys
import time

PROC = pathlib.Path("/proc")


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start time in clock ticks after boot) of process `pid`;
    None when there is no such process (or no /proc: not Linux)."""
    try:
        data = (PROC / str(pid) / "stat").read_bytes()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its ")".
    fields = data[data.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); the group is field 5; the start time field 22.
    return fields[0].decode(), int(fields[2]), int(fields[19])


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot); None if it does not exist."""
    stat = proc_stat(pid)
    return None if stat is None else stat[2]


def boot_id() -> str | None:
    """This boot's id (pids and start times mean something only within one boot)."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip() or None
    except OSError:
        return None


def pid_namespace() -> int | None:
    """This process's pid namespace (its inode): pids mean something only within one."""
    try:
        return os.stat(PROC / "self" / "ns" / "pid").st_ino
    except OSError:
        return None


def is_alive(pid: int, start: int) -> bool:
    """Whether process `pid` runs and is the one that started at `start` (not a zombie)."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z" and stat[2] == start


def _members(pgid: int) -> list[tuple[str, int, int]]:
    """The processes of group `pgid` (from /proc), zombies included."""
    found = []
    with contextlib.suppress(OSError):
        for entry in PROC.iterdir():
            stat = proc_stat(int(entry.name)) if entry.name.isdigit() else None
            if stat is not None and stat[1] == pgid:
                found.append(stat)
    return found


def group_running(pgid: int) -> bool:
    """Whether process group `pgid` has a process that is not a zombie."""
    if not PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return any(state != "Z" for state, _, _ in _members(pgid))


def is_recorded_group(pgid: int, start: int | None) -> bool:
    """Whether group `pgid` is still the one a command started at `start` leads (or led).

    The leader's pid is the group's id. Linux does not give a pid out again while a
    process group of that id exists, and a process given it later started later. So the
    group is the recorded one when some of its processes still run, none started before
    the recorded leader, and the process with the group's id, if there is one, is that
    leader (same start time). Without /proc (`start` None: not Linux) the runner's own
    tracking is trusted.
    """
    if start is None:
        return group_running(pgid)
    leader = proc_stat(pgid)
    if leader is not None and leader[2] != start:
        return False  # the pid is another process's now
    running = [m for m in _members(pgid) if m[0] != "Z"]
    return bool(running) and all(m[2] >= start for m in running)


def kill_groups(groups: dict[int, int | None], grace: float) -> list[int]:
    """SIGTERM each group that is still the recorded one, SIGKILL what is left after
    `grace` seconds; the process groups that were signalled."""
    doomed = [pgid for pgid, start in groups.items() if is_recorded_group(pgid, start)]
    for pgid in doomed:
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_running(pgid) for pgid in doomed):
        time.sleep(0.05)
    for pgid in doomed:
        if is_recorded_group(pgid, groups[pgid]):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
    return doomed


def main() -> None:
    """Track groups from stdin until end of file, then kill the ones still tracked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tracked: dict[int, tuple[int | None, float, str]] = {}  # pgid -> start, grace, record
    for line in sys.stdin.buffer:  # ends when the runner has exited
        try:
            message = json.loads(line)
            if "track" in message:
                start = message.get("start")
                tracked[int(message["track"])] = (
                    None if start is None else int(start),
                    float(message.get("grace") or 0),
                    str(message.get("record") or ""),
                )
            elif "untrack" in message:
                tracked.pop(int(message["untrack"]), None)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    if not tracked:
        return
    grace = max(grace for _, grace, _ in tracked.values())
    kill_groups({pgid: start for pgid, (start, _, _) in tracked.items()}, grace)
    for _, _, record in tracked.values():
        if record:
            with contextlib.suppress(OSError):
                pathlib.Path(record).unlink()


if __name__ == "__main__":
    main()
