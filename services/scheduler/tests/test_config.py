"""The scheduler process names a variable it has no setting for (P4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from agentworks.server.testing import failed_start, free_port, service_env

pytestmark = pytest.mark.timeout(60)


def test_an_unknown_variable_is_logged_at_start_P4(database_url, signing_keys):
    """P4: SCHEDULER_FIRE_CONCURRENCY (removed) and a misspelt SCHEDULER_TICK_SECOND are
    each logged once as a structured warning when the service starts; it still starts."""
    env = {
        **os.environ,
        **service_env(database_url, signing_keys, "SCHEDULER"),
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


def scheduler_config(**env: str):
    from agentworks_scheduler.config import Config

    return Config.from_env({"SCHEDULER_DATABASE_URL": "postgresql://db/x", **env})


@pytest.mark.parametrize(
    ("setting", "bad", "allowed"),
    [
        ("SCHEDULER_TICK_SECONDS", "0", "between 0.05 and 86400"),
        ("SCHEDULER_TICK_SECONDS", "-1", "between 0.05 and 86400"),
        ("SCHEDULER_BATCH_SIZE", "0", "between 1 and 10000"),
        ("SCHEDULER_DELIVERY_TIMEOUT_SECONDS", "0.1", "between 0.5 and 300"),
        ("SCHEDULER_MIN_INTERVAL_SECONDS", "0", "between 1 and 31622400"),
        ("SCHEDULER_WEBHOOK_TOLERANCE_SECONDS", "0", "between 1 and 86400"),
        ("SCHEDULER_WEBHOOK_MAX_BODY_BYTES", "2097152", "between 1 and 1048576"),
        ("SCHEDULER_HISTORY_DAYS", "0", "between 1 and 3660"),
        ("SCHEDULER_DRAIN_SECONDS", "-5", "between 0 and 3600"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_variable_P4_P6(setting, bad, allowed):
    """P4 P6: each numeric setting of the scheduler is refused out of its range (stated
    in docs/operations.md) instead of being clamped silently: a tick of 0 used to become
    0.01 s and a 2 MiB webhook limit 1 MiB."""
    from agentworks.core.settings import ConfigError

    with pytest.raises(ConfigError) as refused:
        scheduler_config(**{setting: bad})
    assert str(refused.value) == f"{setting} must be {allowed}, got {bad!r}"


def test_the_replay_window_outlasts_the_webhook_tolerance_P4_P6():
    """P4 P6 S5: the replay window must be longer than the signature tolerance (else a
    replay would be refused as stale, not as a replay): its default grows with the
    tolerance, and a smaller value set explicitly is refused naming both settings."""
    from agentworks.core.settings import ConfigError

    assert scheduler_config().webhook_replay_window_hours == 24
    assert (
        scheduler_config(SCHEDULER_WEBHOOK_TOLERANCE_SECONDS="86400").webhook_replay_window_hours
        == 49
    )
    with pytest.raises(ConfigError) as refused:
        scheduler_config(
            SCHEDULER_WEBHOOK_TOLERANCE_SECONDS="86400", SCHEDULER_WEBHOOK_REPLAY_WINDOW_HOURS="24"
        )
    assert str(refused.value) == (
        "SCHEDULER_WEBHOOK_REPLAY_WINDOW_HOURS must be at least 49 with "
        "SCHEDULER_WEBHOOK_TOLERANCE_SECONDS=86400, got 24"
    )
    used = scheduler_config(SCHEDULER_TICK_SECONDS="0.1", SCHEDULER_BATCH_SIZE="2000")
    assert (used.tick_seconds, used.batch_size) == (0.1, 2000)


def test_a_bad_setting_stops_the_scheduler_process_with_one_line_P4(signing_keys):
    """P4: `python -m agentworks_scheduler` with SCHEDULER_TICK_SECONDS=0 exits with
    status 2 and one `service.start_failed` JSON line naming it, no traceback."""
    env = {
        **os.environ,
        **service_env("postgresql://127.0.0.1:1/x", signing_keys, "SCHEDULER"),
        "SCHEDULER_LISTEN": f"127.0.0.1:{free_port()}",
        "SCHEDULER_TICK_SECONDS": "0",
        "LOG_JSON": "true",
    }
    status, event = failed_start("agentworks_scheduler", env)
    assert status == 2
    assert event["error"] == "SCHEDULER_TICK_SECONDS must be between 0.05 and 86400, got '0'"
