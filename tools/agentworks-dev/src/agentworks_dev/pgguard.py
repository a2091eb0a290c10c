"""The embedded PostgreSQL ends with `agentworks up`, however `up` ends (issue 35).

PostgreSQL runs detached (pg_ctl), so the kernel's parent-death signal that ends the
other children (parent.py) does not reach it; killed with -9, `up` used to leave it
running until the next start took it over. `up` therefore starts this guard beside it:
a small process in a session of its own holding the read end of a pipe whose write end
only `up` holds. When `up` ends, even by SIGKILL, the kernel closes that end; the guard
reads end-of-file, logs `database.guard_stopping`, and stops the PostgreSQL running on
the data directory (fast shutdown), then exits. On a normal stop `up` stops PostgreSQL
itself first and the guard finds nothing to stop.

    python -m agentworks_dev.pgguard <data directory>
"""

from __future__ import annotations

import contextlib
import pathlib
import signal
import subprocess
import sys

from agentworks_dev.pgserver import STOP_SECONDS, running_pid, stop_running


def start_guard(data: pathlib.Path) -> subprocess.Popen[bytes]:
    """Start the guard of the PostgreSQL on `data`; close its stdin to release it."""
    return subprocess.Popen(
        [sys.executable, "-m", "agentworks_dev.pgguard", str(data)],
        stdin=subprocess.PIPE,
        start_new_session=True,  # the terminal's Ctrl-C is up's to handle, not the guard's
    )


def release(guard: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """End the guard (after `up` stopped PostgreSQL itself)."""
    if guard is None:
        return
    with contextlib.suppress(OSError):
        if guard.stdin is not None:
            guard.stdin.close()
    try:
        guard.wait(timeout)
    except subprocess.TimeoutExpired:
        guard.kill()
        guard.wait()


def main(argv: list[str]) -> int:
    data = pathlib.Path(argv[0])
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the pipe's end ends the guard
    while sys.stdin.buffer.read(4096):
        pass
    pid = running_pid(data)
    if pid is not None:
        print(
            f"database.guard_stopping data={data} pid={pid} reason='agentworks up ended'",
            file=sys.stderr,
            flush=True,
        )
        stop_running(data, STOP_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
