"""`agentworks up` killed with SIGKILL takes its children with it (issue 26, P4): no
service is left half-broken holding its port, and the next `make run` starts."""

from __future__ import annotations

import time

import psutil
import pytest

from tests.test_end_to_end import Up, free_port_block


@pytest.mark.timeout(240)
def test_children_end_with_a_killed_supervisor_and_the_next_up_starts_P4(tmp_path):
    """P4: kill -9 the supervisor of a running suite: every child it started (services,
    gateway, runtimes) ends within 20 s on its own (the kernel's parent-death SIGTERM;
    they used to keep running, sends failing with BrokenPipeError, the ports taken), and
    a new `agentworks up` on the same home and ports becomes ready."""
    base = free_port_block(12)
    http = free_port_block(2)
    first = Up(tmp_path, base, http)
    try:
        first.wait_ready()
        children = psutil.Process(first.process.pid).children()
        assert len(children) >= 4, [c.name() for c in children]
        first.process.kill()
        first.process.wait(10)
        _, alive = psutil.wait_procs(children, timeout=20)
        left = [c for c in alive if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
        assert not left, f"still running after their supervisor died: {left}"
    finally:
        first.stop()
    time.sleep(0.5)
    second = Up(tmp_path, base, http)
    try:
        second.wait_ready()
    finally:
        assert second.stop() == 0, second.output
