"""No command outlives its runner: the watchdog that kills them, orphan reaping (R2, F12)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pathlib
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import structlog

from agentworks.runner import _watchdog
from agentworks.runtime.reporting import describe

log = structlog.get_logger("agentworks.runner.runner")

# Records of the commands running now, one file each, under the root: outside every
# call's folder `.calls/<call_id>/`, so never uploaded.
RECORDS_FOLDER = ".calls/.runner"


def reap_orphans(root: pathlib.Path | str, *, grace: float = 5.0) -> list[int]:
    """Kill the commands that runners which died left running under `root`; their
    process groups.

    Reads the records in `<root>/.calls/.runner/` (made here if missing: a runner's
    first call on a root sweeps it, so the folder is there whether or not a command was
    recorded, e.g. one that ended before it could be). A record written in another boot is
    removed (nothing of it can be running); one written in another pid namespace (a
    runner in another container on the same root) is left alone, as are records whose
    runner is alive (this process, or another runner on the same root). For the others,
    the group is killed (SIGTERM, then SIGKILL after `grace` seconds) if it is still the
    recorded one (same leader start time), and the record is removed.
    """
    stale: dict[pathlib.Path, tuple[int, int, dict[str, Any]]] = {}
    boot, namespace = _watchdog.boot_id(), _watchdog.pid_namespace()
    folder = pathlib.Path(root) / RECORDS_FOLDER
    with contextlib.suppress(OSError):  # there from the first sweep, records or not
        folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            runner_pid, runner_start = int(record["runner_pid"]), int(record["runner_start"])
            pgid, start = int(record["pgid"]), int(record["start"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a record this runner wrote: leave it
        if None not in (boot, record.get("boot_id")) and record["boot_id"] != boot:
            with contextlib.suppress(OSError):
                path.unlink()  # another boot: nothing of it can be running
            continue
        if None not in (namespace, record.get("pid_ns")) and record["pid_ns"] != namespace:
            continue  # another pid namespace's (same boot): its pids are not ours to judge
        if not _watchdog.is_alive(runner_pid, runner_start):
            stale[path] = pgid, start, record
    if not stale:
        return []
    killed = _watchdog.kill_groups({pgid: start for pgid, start, _ in stale.values()}, grace)
    for path, (pgid, _, record) in stale.items():
        if pgid in killed:
            log.warning(
                "command.orphan_killed",
                pgid=pgid,
                call_id=record.get("call_id"),
                runner_pid=record.get("runner_pid"),
            )
        with contextlib.suppress(OSError):
            path.unlink()
    return killed


def _unreaped_child(pid: int) -> bool:
    """Whether `pid` is a child of this process not reaped yet (running, or ended and
    waitable): then its pid is not given out again, and a start time read before this
    is its own. WNOWAIT leaves it for asyncio's child watcher to reap."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class _Guard:
    """This process's running commands: a record of each under its root, and the
    watchdog that kills them if this process dies (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.start = _watchdog.start_time(self.pid)
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.tracked: dict[int, dict[str, Any]] = {}  # pgid -> the watchdog's message
        self.lock = threading.Lock()  # workers may run in several threads' event loops

    def track(self, pid: int, ctx: Any, argv: Sequence[str], grace: float) -> None:
        """A command started as the leader of process group `pid` for `ctx` (an
        execution's context, or a turn's job: its `root`, `call_id`, `log`). Never raises."""
        start = _watchdog.start_time(pid)
        if start is not None and not _unreaped_child(pid):
            # The command ended and was reaped (asyncio's child watcher does so at once)
            # before its start was read: that start may be another process's, given the
            # pid since. Not recorded; the watchdog still ends what is left of its group.
            start = None
        record = ctx.root / RECORDS_FOLDER / f"{self.pid}-{pid}.json"
        if start is not None and self.start is not None:
            written = {
                "pgid": pid,
                "start": start,
                "runner_pid": self.pid,
                "runner_start": self.start,
                "boot_id": _watchdog.boot_id(),
                "pid_ns": _watchdog.pid_namespace(),
                "call_id": ctx.call_id,
                "argv": list(argv),
            }
            try:
                record.parent.mkdir(parents=True, exist_ok=True)
                temporary = record.with_suffix(".tmp")
                temporary.write_text(json.dumps(written))
                os.replace(temporary, record)  # a record is whole or absent
            except OSError as exc:
                ctx.log.warning("command.record_failed", error=describe(exc))
        message = {"track": pid, "start": start, "grace": grace, "record": str(record)}
        with self.lock:
            self.tracked[pid] = message
            self._send(message)

    def untrack(self, pid: int) -> None:
        """The command that led group `pid` has ended (or was killed). Never raises."""
        with self.lock:
            message = self.tracked.pop(pid, None)
            if message is None:
                return
            with contextlib.suppress(OSError):
                pathlib.Path(message["record"]).unlink()
            self._send({"untrack": pid})

    def _send(self, message: dict[str, Any]) -> None:
        watchdog = self.watchdog
        if watchdog is not None and watchdog.poll() is None:
            try:
                _write_line(watchdog, message)
                return
            except (OSError, ValueError):  # ValueError: its pipe was closed (at exit)
                pass  # start another below
        self._start_watchdog()

    def _start_watchdog(self) -> None:
        """Start the watchdog (again) and tell it every command running now."""
        if not self.tracked:
            return
        if self.watchdog is None:
            atexit.register(self.close)
        else:
            log.warning("runner.watchdog_restarted", exit_status=self.watchdog.poll())
            self.close()
            with contextlib.suppress(OSError):
                self.watchdog.kill()
            self.watchdog.wait()
        try:
            # A plain Popen (no preexec_fn): safe in a process with threads.
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", _watchdog.__file__, str(self.pid)],
                bufsize=0,  # nothing left in a buffer to flush into a broken pipe later
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a signal to this process's group spares it
            )
            for message in self.tracked.values():
                _write_line(self.watchdog, message)
        except (OSError, ValueError) as exc:
            log.warning("runner.watchdog_failed", error=describe(exc))

    def close(self) -> None:
        """At exit: let the watchdog go (it kills what still runs, not waited for)."""
        if self.watchdog is None or self.pid != os.getpid():
            return
        if self.watchdog.stdin is not None:
            with contextlib.suppress(OSError):
                self.watchdog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.watchdog.wait(0 if self.tracked else 0.5)


def _write_line(watchdog: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    """One JSON line to the watchdog's (unbuffered) stdin, all of it."""
    assert watchdog.stdin is not None
    data = memoryview(json.dumps(message).encode() + b"\n")
    while data:
        written = watchdog.stdin.write(data)
        if not written:
            raise OSError("the watchdog's pipe takes nothing")
        data = data[written:]


_the_guard: _Guard | None = None


def _guard() -> _Guard:
    """This process's guard (a forked child gets its own)."""
    global _the_guard
    if _the_guard is None or _the_guard.pid != os.getpid():
        _the_guard = _Guard()
    return _the_guard


def _forget_guard_in_child() -> None:
    """After os.fork() (multiprocessing too), in the child: close its copy of the
    watchdog pipe's write end, sending nothing (unbuffered), so the watchdog reads end of
    file when the runner dies, whatever children it forked; the child gets its own guard."""
    global _the_guard
    guard, _the_guard = _the_guard, None
    if guard is not None and guard.watchdog is not None and guard.watchdog.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            guard.watchdog.stdin.close()


os.register_at_fork(after_in_child=_forget_guard_in_child)
