"""The suite's home (`.agentworks`): secrets kept 0600, one running suite per home."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import time
from collections.abc import Callable

from agentworks_dev.probes import _refusal
from agentworks_dev.specs import LOCK_FILE, StartupError


def write_secret(path: pathlib.Path, value: str) -> None:
    """Write `value` to a new 0600 file (replacing any previous one atomically)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    os.replace(tmp, path)


def load_or_create_secret(path: pathlib.Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The secret kept in `path`, created with `make()` if absent; (value, created)."""
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
        if value:
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)
            return value, False
    value = make()
    write_secret(path, value)
    return value, True


def lock_home(home: pathlib.Path, info: dict[str, object]) -> int:
    """Take `home/up.lock` for this process's lifetime and write `info` into it; the fd.

    fcntl.flock: the kernel drops the lock when the process ends, however it ends (no
    stale pid file after kill -9). Another `up` holding it is a StartupError that says
    which pid and ports, and how to run a second suite.
    """
    path = home / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder: dict[str, object] = {}
        for _ in range(10):  # the holder writes right after locking: give it a moment
            with contextlib.suppress(OSError, ValueError):
                read = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
                holder = read if isinstance(read, dict) else {}
            if holder:
                break
            time.sleep(0.05)
        os.close(fd)
        raise StartupError(_refusal(home, holder)) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    return fd
