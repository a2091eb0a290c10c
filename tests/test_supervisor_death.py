"""`agentworks up` killed with SIGKILL takes its children with it (issue 26, P4): no
service is left half-broken holding its port, and the next `make run` starts."""

from __future__ import annotations

import time

import psutil
import pytest

from agentworks.server.testing import free_port_block, until_sync
from tests.test_end_to_end import Up


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
    time.sleep(0.5)  # settling time for the killed suite's sockets and files: no one state to await
    second = Up(tmp_path, base, http)
    try:
        second.wait_ready()
    finally:
        assert second.stop() == 0, second.output


@pytest.mark.timeout(240)
def test_the_embedded_database_is_restarted_when_it_dies_P3_P4(tmp_path):
    """P3 P4: kill -9 the embedded PostgreSQL of a running suite: `agentworks up` notices
    within seconds, says so (`database.died`, `database.restarted`), starts it again on the
    same data and port, and the gateway's health (a database read) is OK again; it used to
    go unnoticed, every service answering UNAVAILABLE until a restart by hand."""
    import httpx

    base = free_port_block(12)
    http = free_port_block(2)
    up = Up(tmp_path, base, http)
    try:
        up.wait_ready()
        pid_file = tmp_path / ".agentworks" / "pg" / "postmaster.pid"
        before = int(pid_file.read_text().split()[0])
        psutil.Process(before).kill()
        up.wait_for("database.died", timeout=30)
        up.wait_for("database.restarted", timeout=60)
        after = int(pid_file.read_text().split()[0])
        assert after != before and psutil.pid_exists(after)

        def healthy() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{http}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            until_sync(healthy, 60, every=0.2)
        except AssertionError:
            raise AssertionError(f"the gateway stayed unhealthy:\n{up.grep('database.')}") from None
    finally:
        assert up.stop() == 0, up.output
