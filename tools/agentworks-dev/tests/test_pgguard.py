"""The embedded PostgreSQL ends with `agentworks up`, even when `up` is killed -9."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from agentworks_dev.pgserver import running_pid

# What `up` does with its database, in a process of its own to be killed: start the
# embedded server and its guard, then wait.
_UP = """
import pathlib, sys, time
from agentworks_dev.pgguard import start_guard
from agentworks_dev.pgserver import start_server
server = start_server(pathlib.Path(sys.argv[1]))
start_guard(server.data)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(120)
@pytest.mark.alone
@pytest.mark.reliability(
    scenario="`make run` (agentworks up) is killed with SIGKILL",
    action="a guard holding a pipe from `up` stops PostgreSQL when the pipe closes",
    check="the embedded PostgreSQL ends within 15 s of `up`",
)
def test_the_embedded_database_ends_with_a_killed_up_P2_P4(tmp_path):
    """P2 P4: kill -9 the process that started the embedded PostgreSQL: its guard sees
    the pipe close and stops PostgreSQL within 15 s. It used to keep running until the
    next `make run` took it over."""
    data = tmp_path / "pg"
    up = subprocess.Popen([sys.executable, "-c", _UP, str(data)], stdout=subprocess.PIPE, text=True)
    try:
        assert up.stdout is not None and up.stdout.readline().strip() == "ready"
        pid = running_pid(data)
        assert pid is not None
        up.kill()
        up.wait(10)
        deadline = time.monotonic() + 15
        while psutil.pid_exists(pid) and running_pid(data) == pid:
            assert time.monotonic() < deadline, "PostgreSQL outlived its `up`"
            time.sleep(0.1)
    finally:
        if up.poll() is None:
            up.kill()
        if up.stdout is not None:
            up.stdout.close()
        pid = running_pid(data)
        if pid is not None:
            psutil.Process(pid).terminate()
