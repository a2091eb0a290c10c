"""Inside an execution's sandbox: start the command with its limits, report how it ended.

Runs as `python -I -S _sandbox_init.py STATUS_FD LIMITS_JSON -- ARGV...`, the
sandbox's first process after bubblewrap's own init, as the sandbox user. It imports
nothing outside the standard library. It:

- starts ARGV in a session of its own (so the runner can tell the command's processes
  by their group) with the rlimits in LIMITS_JSON (`{"RLIMIT_NPROC": n, ...}`, soft and
  hard; RLIMIT_CPU gets a hard limit 2 s above, so SIGXCPU comes first); this process
  has one thread, so setting them between fork and exec is safe;
- waits for it; a process it started that still holds its stdout or stderr keeps the
  command running (as outside a sandbox), so then waits until none does;
- writes one JSON line to STATUS_FD, `{"returncode": N, "cpu_seconds": S}` (N negative
  for a signal, S the CPU time of the command and what it waited for) or
  `{"error": TEXT}` when it could not start, and exits. Its exit ends the sandbox:
  bubblewrap's init exits with it and the kernel kills what is left in the namespace.

SIGTERM, SIGINT and SIGHUP are caught and ignored here (the command gets them from the
runner, which signals every process of the sandbox): this process must outlive the
command, or the sandbox would end before the command's grace time.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time


def _holders(pipes: set[str]) -> bool:
    """Whether a process other than this one and the namespace's init holds one of
    `pipes` (as `pipe:[inode]`) open."""
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid in ("1", me):
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in pipes:
                    return True
        except OSError:
            continue  # gone, or not ours to read
    return False


def _pipes() -> set[str]:
    found = set()
    for fd in (1, 2):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("pipe:"):
            found.add(link)
    return found


def main() -> int:
    status_fd, limits_json, separator, *argv = sys.argv[1:]
    assert separator == "--" and argv, "usage: _sandbox_init.py STATUS_FD LIMITS -- ARGV"
    status = os.fdopen(int(status_fd), "w")
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)
    wanted = json.loads(limits_json).items()
    limits = {getattr(resource, name): int(value) for name, value in wanted}

    def limit() -> None:
        for which, value in limits.items():
            hard = value + 2 if which == resource.RLIMIT_CPU else value
            resource.setrlimit(which, (value, hard))

    try:
        child = subprocess.Popen(argv, preexec_fn=limit, start_new_session=True)
    except OSError as exc:
        status.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        status.close()
        return 127
    while True:
        try:
            _, wait_status, usage = os.wait4(child.pid, 0)
            break
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            wait_status, usage = 0, None
            break
    child.returncode = returncode = os.waitstatus_to_exitcode(wait_status)
    pipes = _pipes()
    while pipes and _holders(pipes):
        time.sleep(0.1)
    cpu = 0.0 if usage is None else usage.ru_utime + usage.ru_stime
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = max(cpu, children.ru_utime + children.ru_stime)
    status.write(json.dumps({"returncode": returncode, "cpu_seconds": round(cpu, 3)}) + "\n")
    status.close()
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    sys.exit(main())
