"""Reading settings from the environment: unknown variables are named, not silently
dropped (P4)."""

from __future__ import annotations

import pytest

from agentworks.core.settings import ConfigError, Env
from agentworks.server.config import ServiceConfig


def test_a_variable_no_setting_read_is_named_with_the_closest_setting_P4():
    """P4: after the config is read, each `<PREFIX>_*` variable nothing asked for is
    reported, with the nearest known name when there is one; other prefixes, shared
    unprefixed names and `<PREFIX>_ADDRESS` (how other services reach this one) are not."""
    env = Env(
        "SCHEDULER",
        {
            "SCHEDULER_TICK_SECOND": "5",  # a typo of TICK_SECONDS
            "SCHEDULER_FIRE_CONCURRENCY": "8",  # a setting this version does not have
            "SCHEDULER_BATCH_SIZE": "50",
            "SCHEDULER_ADDRESS": "127.0.0.1:50053",
            "MESSAGING_POOL_SIZE": "3",
            "DATABASE_URL": "postgresql://db/agentworks",
        },
    )
    config = ServiceConfig.from_env("scheduler", 50053, env)
    assert env.get_float("TICK_SECONDS", 60.0) == 60.0
    assert env.get_int("BATCH_SIZE", 100) == 50
    assert config.database_url == "postgresql://db/agentworks"

    assert env.unknown() == [
        "SCHEDULER_FIRE_CONCURRENCY is not a setting and was ignored",
        "SCHEDULER_TICK_SECOND is not a setting and was ignored; "
        "did you mean SCHEDULER_TICK_SECONDS?",
    ]
    assert config.env is env


def test_an_environment_of_known_settings_reports_nothing_P4():
    """P4: every variable read (set or not) counts as known."""
    env = Env("FUNCTIONS", {"FUNCTIONS_POOL_SIZE": "4", "FUNCTIONS_LISTEN": "127.0.0.1:1"})
    ServiceConfig.from_env("functions", 50052, env)
    assert env.unknown() == []


def service_config(**environ: str) -> ServiceConfig:
    return ServiceConfig.from_env("messaging", 50051, Env("MESSAGING", environ))


def refusal(**environ: str) -> str:
    with pytest.raises(ConfigError) as refused:
        service_config(**environ)
    return str(refused.value)


def test_out_of_range_settings_are_refused_naming_the_variable_P4_P6():
    """P4 P6: every numeric setting every service has is range-checked when read: a pool
    of 0 (every request would wait) or -3 (a crash not naming the setting), a negative
    drain and a metrics refresh below 0.1 s are refused with the variable, the allowed
    range and the value, instead of being used or clamped silently."""
    assert refusal(MESSAGING_POOL_SIZE="0") == (
        "MESSAGING_POOL_SIZE must be between 1 and 1000, got '0'"
    )
    assert refusal(MESSAGING_POOL_SIZE="-3").endswith("between 1 and 1000, got '-3'")
    assert "got '1001'" in refusal(MESSAGING_POOL_SIZE="1001")
    assert refusal(MESSAGING_POOL_SIZE="ten") == "MESSAGING_POOL_SIZE must be an integer, got 'ten'"
    assert refusal(MESSAGING_DRAIN_SECONDS="-5") == (
        "MESSAGING_DRAIN_SECONDS must be between 0 and 3600, got '-5'"
    )
    assert refusal(MESSAGING_DRAIN_SECONDS="nan") == (
        "MESSAGING_DRAIN_SECONDS must be a finite number, got 'nan'"
    )
    assert refusal(MESSAGING_METRICS_REFRESH_SECONDS="0") == (
        "MESSAGING_METRICS_REFRESH_SECONDS must be between 0.1 and 3600, got '0'"
    )
    # The bounds themselves are accepted, and the defaults are within them.
    edge = service_config(
        MESSAGING_POOL_SIZE="1",
        MESSAGING_DRAIN_SECONDS="0",
        MESSAGING_METRICS_REFRESH_SECONDS="0.1",
    )
    assert (edge.pool_size, edge.drain_seconds, edge.metrics_refresh_seconds) == (1, 0.0, 0.1)
    default = service_config()
    assert (default.pool_size, default.drain_seconds, default.metrics_refresh_seconds) == (
        10,
        10.0,
        5.0,
    )


def test_yes_no_and_log_level_settings_refuse_unknown_words_P4():
    """P4: LOG_JSON=ture no longer switches to console output silently, nor does
    LOG_LEVEL=verbose fall back to info: both are refused. A value set only in the shared
    variable is named as such; the prefixed form wins over it."""
    assert refusal(LOG_JSON="ture") == (
        "LOG_JSON must be true or false (also 1/0, yes/no, on/off), got 'ture'"
    )
    assert refusal(MESSAGING_LOG_JSON="2").startswith("MESSAGING_LOG_JSON must be true or false")
    assert refusal(LOG_LEVEL="verbose") == (
        "LOG_LEVEL must be one of debug, info, warning, warn, error, critical, got 'verbose'"
    )
    assert refusal(MESSAGING_LOG_LEVEL="trace").startswith("MESSAGING_LOG_LEVEL must be one of")
    for word, expected in [("TRUE", True), ("on", True), (" 1 ", True), ("No", False)]:
        assert service_config(LOG_JSON=word).log_json is expected
    config = service_config(LOG_LEVEL="verbose", MESSAGING_LOG_LEVEL="WARNING")
    assert config.log_level == "warning"
    assert service_config(LOG_JSON="false", MESSAGING_LOG_JSON="true").log_json is True


def test_listen_addresses_must_be_host_and_port_P4():
    """P4: `<SERVICE>_LISTEN` and `<SERVICE>_METRICS_LISTEN` must be host:port with a port
    of 0-65535 (IPv6 in brackets); the metrics one may leave the host out (127.0.0.1) or
    be empty (off)."""
    assert refusal(MESSAGING_LISTEN="garbage") == (
        "MESSAGING_LISTEN must look like host:port (port 0-65535, IPv6 as [::1]:port), "
        "got 'garbage'"
    )
    for bad in ("127.0.0.1:99999", ":50051", "[::1:50051", "host:\uff15\uff10"):
        assert refusal(MESSAGING_LISTEN=bad).startswith("MESSAGING_LISTEN must look like"), bad
    assert refusal(MESSAGING_METRICS_LISTEN="9100").startswith(
        "MESSAGING_METRICS_LISTEN must look like host:port"
    )
    for good in ("0.0.0.0:50051", "[::]:0", "localhost:1"):
        assert service_config(MESSAGING_LISTEN=good).listen == good
    assert service_config(MESSAGING_METRICS_LISTEN=":9100").metrics_listen == ":9100"
    assert service_config().metrics_listen == ""
