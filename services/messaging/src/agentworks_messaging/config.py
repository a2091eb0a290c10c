"""Messaging configuration, read once from MESSAGING_* (and shared) environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.settings import Env
from agentworks.server.config import ServiceConfig

DEFAULT_PORT = 50051
# Shortest sweep and long-poll re-check intervals: below, a loop would spin on the
# database (0 made the sweeper busy-loop).
MIN_INTERVAL_SECONDS = 0.05
# Submission keys are kept at least this long (C4); smaller values are raised to it.
MIN_DEDUP_WINDOW_HOURS = 24


@dataclass(frozen=True)
class Config:
    """Everything the messaging service reads from its environment."""

    service: ServiceConfig
    # How often each replica looks for turns whose lease expired (C11).
    sweep_seconds: float
    # Waiting long-polls re-check the database at least this often, in case a
    # notification was missed while the listener reconnected.
    poll_fallback_seconds: float
    # How long submission_id keys are kept for deduplication (C4); at least 24 hours
    # (docs/messaging.md: 0-23 are raised to 24).
    dedup_window_hours: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = Env("MESSAGING", dict(os.environ if environ is None else environ))
        return cls(
            service=ServiceConfig.from_env("messaging", DEFAULT_PORT, env),
            sweep_seconds=env.get_float(
                "SWEEP_SECONDS", 1.0, minimum=MIN_INTERVAL_SECONDS, maximum=3600
            ),
            poll_fallback_seconds=env.get_float(
                "POLL_FALLBACK_SECONDS", 5.0, minimum=MIN_INTERVAL_SECONDS, maximum=3600
            ),
            dedup_window_hours=max(
                MIN_DEDUP_WINDOW_HOURS,
                env.get_int("DEDUP_WINDOW_HOURS", 168, minimum=0, maximum=24 * 366),
            ),
        )
