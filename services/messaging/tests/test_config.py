"""Messaging's settings and start-up failures, from the real entry point (P4, P6).

A start that cannot succeed ends with one `service.start_failed` JSON line naming the
setting at fault and exit status 2 (a setting) or 1 (anything else), no traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from agentworks.core.keys import KeyDirectory
from agentworks.core.settings import ConfigError
from agentworks.server import testing
from agentworks.server.testing import free_port, scrape, service_env
from agentworks_messaging.config import Config

pytestmark = pytest.mark.timeout(90)

# Refuses connections at once: for failures found before the database is used.
NO_DATABASE = "postgresql://aw:s3cret@127.0.0.1:1/agentworks"


def environment(database_url: str, signing_keys: KeyDirectory, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        **service_env(database_url, signing_keys, "MESSAGING"),
        "MESSAGING_LISTEN": f"127.0.0.1:{free_port()}",
        "LOG_JSON": "true",
        "LOG_LEVEL": "info",
        **extra,
    }


def failed_start(env: dict[str, str]) -> tuple[int, dict]:
    """Run `python -m agentworks_messaging` until it exits; its status and its one line."""
    return testing.failed_start("agentworks_messaging", env)


@pytest.mark.parametrize(
    ("setting", "value", "error"),
    [
        ("MESSAGING_SWEEP_SECONDS", "0", "MESSAGING_SWEEP_SECONDS must be between 0.05 and 3600"),
        ("MESSAGING_SWEEP_SECONDS", "-1", "MESSAGING_SWEEP_SECONDS must be between 0.05"),
        ("MESSAGING_POLL_FALLBACK_SECONDS", "0", "MESSAGING_POLL_FALLBACK_SECONDS must be"),
        ("MESSAGING_POOL_SIZE", "-3", "MESSAGING_POOL_SIZE must be between 1 and 1000"),
        ("MESSAGING_DRAIN_SECONDS", "-5", "MESSAGING_DRAIN_SECONDS must be between 0 and 3600"),
        ("MESSAGING_LISTEN", "garbage", "MESSAGING_LISTEN must look like host:port"),
        ("MESSAGING_METRICS_LISTEN", "9100", "MESSAGING_METRICS_LISTEN must look like host:port"),
        ("LOG_LEVEL", "verbose", "LOG_LEVEL must be one of debug, info, warning"),
        ("LOG_JSON", "ture", "LOG_JSON must be true or false"),
        ("AGENTWORKS_SIGNING_KEY", "", "no signing key: set AGENTWORKS_SIGNING_KEY"),
        ("AGENTWORKS_TRUSTED_KEYS", "", "AGENTWORKS_SIGNING_KEY is set but AGENTWORKS_TRUSTED"),
        ("MESSAGING_DATABASE_URL", "", "no database configured; set MESSAGING_DATABASE_URL"),
    ],
)
def test_a_bad_setting_stops_the_start_with_one_line_naming_it_P4_P6(
    signing_keys, setting, value, error
):
    """P4 P6: a setting out of range, not host:port, not a known word, or missing stops
    the start at once: one JSON line naming it (JSON even when LOG_JSON is the bad one),
    exit status 2, no traceback."""
    env = environment(NO_DATABASE, signing_keys, **{setting: value})
    env.pop("DATABASE_URL", None)
    status, event = failed_start(env)
    assert status == 2
    assert event["error"].startswith(error), event["error"]
    if value:
        assert event["error"].endswith(f"got {value!r}") or setting.endswith("_URL")


def test_a_service_given_another_signers_key_does_not_start_T1(signing_keys):
    """T1: messaging started with the gateway's private key refuses to start (status 2),
    naming whose key it is: a service signs only as itself."""
    gateway = signing_keys.env("gateway")["AGENTWORKS_SIGNING_KEY"]
    status, event = failed_start(
        environment(NO_DATABASE, signing_keys, AGENTWORKS_SIGNING_KEY=gateway)
    )
    assert status == 2
    assert "belongs to signer gateway" in event["error"]
    assert "messaging signs as service:messaging" in event["error"]


def test_a_taken_port_fails_the_start_naming_the_setting_P4(signing_keys):
    """P4: a listen or metrics port another process holds fails the start (status 1) with
    the address and the setting, before `service.ready` (metrics are served first)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        status, event = failed_start(environment(NO_DATABASE, signing_keys, MESSAGING_LISTEN=busy))
        assert status == 1
        assert (
            event["error"] == f"cannot listen on {busy} (MESSAGING_LISTEN): Address already in use"
        )

        status, event = failed_start(
            environment(NO_DATABASE, signing_keys, MESSAGING_METRICS_LISTEN=busy)
        )
        assert status == 1
        assert event["error"] == (
            f"cannot serve metrics on {busy} (MESSAGING_METRICS_LISTEN): Address already in use"
        )

    status, event = failed_start(
        environment(NO_DATABASE, signing_keys, MESSAGING_LISTEN="nohost.invalid:50051")
    )
    assert status == 1
    assert event["error"].startswith(
        "cannot listen on nohost.invalid:50051 (MESSAGING_LISTEN): host 'nohost.invalid' "
        "does not resolve"
    )


def test_an_unreachable_database_fails_the_start_naming_it_without_the_password_P4(
    signing_keys,
):
    """P4: PostgreSQL unreachable at start: one event naming the database (user, host,
    port, name; never the password) and the reason, exit status 1."""
    status, event = failed_start(environment(NO_DATABASE, signing_keys))
    assert status == 1
    assert event["database"] == "aw@127.0.0.1:1/agentworks"
    assert event["error"].startswith("cannot connect to the database aw@127.0.0.1:1/agentworks: ")
    assert "Connection refused" in event["error"]
    assert "s3cret" not in json.dumps(event)


def test_ready_reports_the_bound_host_and_port_after_serving_metrics_P4(database_url, signing_keys):
    """P4: `service.ready` and the stdout line report the host the service listens on
    and the port it bound (0.0.0.0 and a port the kernel picked here, not 127.0.0.1);
    metrics answer once it is logged; a SIGTERM right after drains (exit 0); every
    stderr line is JSON."""
    env = environment(
        database_url,
        signing_keys,
        MESSAGING_LISTEN="0.0.0.0:0",
        MESSAGING_METRICS_LISTEN="127.0.0.1:0",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentworks_messaging"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        # Logged before the stdout line, so it is there already.
        ready = json.loads(proc.stderr.readline())
        while ready["event"] != "service.ready":
            ready = json.loads(proc.stderr.readline())
        assert (
            scrape(ready["metrics_port"]).value("agentworks_long_poll_waiters", service="messaging")
            == 0
        )
    finally:
        proc.terminate()
        rest, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0
    port = ready["port"]
    assert port > 0
    assert ready["address"] == f"0.0.0.0:{port}"
    assert line == f"messaging listening on 0.0.0.0:{port}\n"
    assert rest == ""  # the one stdout line
    after = [json.loads(text)["event"] for text in stderr.splitlines()]
    assert after[-2:] == ["service.draining", "server.stopped"]


def test_messaging_intervals_and_windows_are_range_checked_P4_P6():
    """P4 P6: MESSAGING_SWEEP_SECONDS and MESSAGING_POLL_FALLBACK_SECONDS are 0.05 s to an
    hour (0 made the sweeper spin); MESSAGING_DEDUP_WINDOW_HOURS below 24 is raised to 24,
    as docs/messaging.md states, and a negative one is refused."""

    def config(**env: str) -> Config:
        return Config.from_env({"MESSAGING_DATABASE_URL": "postgresql://db/x", **env})

    for setting in ("MESSAGING_SWEEP_SECONDS", "MESSAGING_POLL_FALLBACK_SECONDS"):
        for bad in ("0", "-1", "0.01", "3601", "inf"):
            with pytest.raises(ConfigError, match=setting):
                config(**{setting: bad})
    edge = config(MESSAGING_SWEEP_SECONDS="0.05", MESSAGING_POLL_FALLBACK_SECONDS="3600")
    assert (edge.sweep_seconds, edge.poll_fallback_seconds) == (0.05, 3600.0)
    assert config().dedup_window_hours == 168
    assert config(MESSAGING_DEDUP_WINDOW_HOURS="12").dedup_window_hours == 24
    with pytest.raises(ConfigError, match="MESSAGING_DEDUP_WINDOW_HOURS must be between 0"):
        config(MESSAGING_DEDUP_WINDOW_HOURS="-1")
