"""The scheduler process names a variable it has no setting for (P4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentworks.core.testing import free_port, service_env

pytestmark = pytest.mark.timeout(60)


def test_an_unknown_variable_is_logged_at_start_P4(database_url, internal_key):
    """P4: SCHEDULER_FIRE_CONCURRENCY (removed) and a misspelt SCHEDULER_TICK_SECOND are
    each logged once as a structured warning when the service starts; it still starts."""
    env = {
        **os.environ,
        **service_env(database_url, internal_key, "SCHEDULER"),
        "SCHEDULER_LISTEN": f"127.0.0.1:{free_port()}",
        "SCHEDULER_FIRE_CONCURRENCY": "8",
        "SCHEDULER_TICK_SECOND": "5",
        "LOG_JSON": "true",
        "LOG_LEVEL": "info",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentworks_scheduler"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert "scheduler listening on" in proc.stdout.readline()
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    warnings = [
        line["problem"]
        for line in map(json.loads, filter(None, stderr.splitlines()))
        if line.get("event") == "config.unknown_setting"
    ]
    assert warnings == [
        "SCHEDULER_FIRE_CONCURRENCY is not a setting and was ignored",
        "SCHEDULER_TICK_SECOND is not a setting and was ignored; "
        "did you mean SCHEDULER_TICK_SECONDS?",
    ]
