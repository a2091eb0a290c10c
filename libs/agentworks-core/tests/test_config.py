"""Reading settings from the environment: unknown variables are named, not silently
dropped (P4)."""

from __future__ import annotations

from agentworks.core.config import Env, ServiceConfig


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
