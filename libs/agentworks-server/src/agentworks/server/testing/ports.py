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


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (Linux's default 32768)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_block(count: int) -> int:
    """The first of `count` consecutive TCP ports on 127.0.0.1 that were all free a moment
    ago (for a program that takes a base port and uses the ones after it). Taken below the
    ephemeral range: there any outgoing connection of a parallel test could take one of
    them before the program binds it (a run failed so: "Address already in use")."""
    top = min(_ephemeral_low(), 60000) - count
    for _ in range(200):
        base = random.randint(min(10000, top - 1000), top)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    stack.enter_context(socket.socket()).bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError("no block of free ports found")
