"""Functions' settings are range-checked; a bad one stops the real process (P4, P6)."""

from __future__ import annotations

import os

import pytest

from agentworks.core.settings import ConfigError
from agentworks.server.testing import failed_start, free_port, service_env
from agentworks_functions.config import Config

pytestmark = pytest.mark.timeout(90)


def config(**env: str) -> Config:
    return Config.from_env({"FUNCTIONS_DATABASE_URL": "postgresql://db/x", **env})


@pytest.mark.parametrize(
    ("setting", "bad", "allowed"),
    [
        ("FUNCTIONS_SWEEP_SECONDS", "0", "between 0.05 and 3600"),
        ("FUNCTIONS_POLL_FALLBACK_SECONDS", "0", "between 0.05 and 3600"),
        ("FUNCTIONS_NOTICE_RETRY_SECONDS", "-1", "between 0.05 and 3600"),
        ("FUNCTIONS_DEFAULT_RUNNING_LIMIT", "0", "between 1 and 1000"),
        ("FUNCTIONS_MIN_LEASE_SECONDS", "0", "between 1 and 86400"),
        ("FUNCTIONS_MAX_LEASE_SECONDS", "100000", "between 1 and 86400"),
        ("FUNCTIONS_STALE_UPLOAD_SECONDS", "10", "between 60 and 2592000"),
        ("FUNCTIONS_CLAIM_TIMEOUT_SECONDS", "-1", "between 0 and 2592000"),
        ("FUNCTIONS_POOL_SIZE", "0", "between 1 and 1000"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_variable_P4_P6(setting, bad, allowed):
    """P4 P6: each numeric setting of functions is refused out of its range (stated in
    docs/operations.md), naming the variable, the range and the value."""
    with pytest.raises(ConfigError) as refused:
        config(**{setting: bad})
    assert str(refused.value) == f"{setting} must be {allowed}, got {bad!r}"


def test_the_bounds_and_what_the_tests_use_are_accepted_P4_P6():
    """P4 P6: the edges of each range are accepted (0 keeps a call waiting for a runtime
    forever), and so are the values the suite's own tests run with."""
    edge = config(
        FUNCTIONS_SWEEP_SECONDS="0.05",
        FUNCTIONS_CLAIM_TIMEOUT_SECONDS="0",
        FUNCTIONS_MIN_LEASE_SECONDS="1",
        FUNCTIONS_MAX_LEASE_SECONDS="1",
        FUNCTIONS_STALE_UPLOAD_SECONDS="60",
    )
    assert (edge.sweep_seconds, edge.claim_timeout_seconds) == (0.05, 0.0)
    assert (edge.min_lease_seconds, edge.max_lease_seconds) == (1, 1)
    assert edge.stale_upload_seconds == 60
    with pytest.raises(ConfigError, match="FUNCTIONS_MIN_LEASE_SECONDS must be at most"):
        config(FUNCTIONS_MIN_LEASE_SECONDS="30", FUNCTIONS_MAX_LEASE_SECONDS="20")
    used = config(
        FUNCTIONS_SWEEP_SECONDS="0.2",
        FUNCTIONS_MIN_LEASE_SECONDS="1",
        FUNCTIONS_NOTICE_RETRY_SECONDS="0.2",
        FUNCTIONS_POLL_FALLBACK_SECONDS="0.5",
        FUNCTIONS_CLAIM_TIMEOUT_SECONDS="1",
        FUNCTIONS_DEFAULT_RUNNING_LIMIT="3",
        FUNCTIONS_METRICS_REFRESH_SECONDS="0.1",
    )
    assert used.poll_fallback_seconds == 0.5


def test_a_bad_setting_stops_the_functions_process_with_one_line_P4(signing_keys):
    """P4: `python -m agentworks_functions` with FUNCTIONS_POLL_FALLBACK_SECONDS=0 exits
    with status 2 and one `service.start_failed` JSON line naming it, no traceback."""
    env = {
        **os.environ,
        **service_env("postgresql://127.0.0.1:1/x", signing_keys, "FUNCTIONS"),
        "FUNCTIONS_LISTEN": f"127.0.0.1:{free_port()}",
        "FUNCTIONS_POLL_FALLBACK_SECONDS": "0",
        "LOG_JSON": "true",
    }
    status, event = failed_start("agentworks_functions", env)
    assert status == 2
    assert event | {"timestamp": None} == {
        "event": "service.start_failed",
        "service": "functions",
        "level": "error",
        "error": "FUNCTIONS_POLL_FALLBACK_SECONDS must be between 0.05 and 3600, got '0'",
        "exit_status": 2,
        "timestamp": None,
    }
