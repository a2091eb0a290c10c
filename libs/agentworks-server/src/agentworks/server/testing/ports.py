"""Free TCP ports for the processes a test starts (metrics listeners, fixed addresses)."""

from __future__ import annotations

import contextlib
import random
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for `<SERVICE>_METRICS_LISTEN`,
    or the `<SERVICE>_LISTEN` of a process that keeps its address across restarts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_block(count: int) -> int:
    """The first of `count` consecutive TCP ports on 127.0.0.1 that were all free a moment
    ago (for a program that takes a base port and uses the ones after it)."""
    for _ in range(200):
        base = random.randint(20000, 60000 - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError("no block of free ports found")
