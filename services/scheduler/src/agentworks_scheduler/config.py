"""Scheduler configuration, read once from SCHEDULER_* (and shared) environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# Messaging refuses payloads above 1 MiB, so a webhook body can never be larger.
from agentworks.core.limits import MAX_WEBHOOK_BODY_BYTES as MAX_WEBHOOK_BODY_BYTES
from agentworks.core.limits import WEBHOOK_BODY_BYTES_DEFAULT
from agentworks.core.settings import ConfigError, Env
from agentworks.server.config import ServiceConfig
from agentworks_scheduler.recurrence import MAX_INTERVAL_SECONDS

DEFAULT_PORT = 50053
# Shortest tick: below, the ticker would spin on the database.
MIN_TICK_SECONDS = 0.05


@dataclass(frozen=True)
class Config:
    """Everything the scheduler service reads from its environment."""

    service: ServiceConfig
    # Where EnqueueDeliveries and the participation check go (host:port[,host:port...]).
    messaging_address: str
    # How often each replica looks for due wake-ups and schedule occurrences (S2).
    tick_seconds: float
    # Occurrences one replica claims per transaction and sends to messaging in one
    # EnqueueDeliveries request (or a few, past 500 or 2 MiB of text).
    batch_size: int
    # Deadline of one EnqueueDeliveries request; what it carried is retried on a later tick.
    delivery_timeout_seconds: float
    # Shortest interval a schedule may have.
    min_interval_seconds: int
    # Webhooks (S5): signature timestamp tolerance, body limit, replay window.
    webhook_tolerance_seconds: int
    webhook_max_body_bytes: int
    webhook_replay_window_hours: int
    # Key the webhook secrets are derived from (required: the start refuses none).
    webhook_key: str
    # Fired, cancelled and failed wake-ups are kept this long for listing.
    history_days: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = Env("SCHEDULER", dict(os.environ if environ is None else environ))
        service = ServiceConfig.from_env("scheduler", DEFAULT_PORT, env)
        tolerance = env.get_int("WEBHOOK_TOLERANCE_SECONDS", 300, minimum=1, maximum=86400)
        # Longer than the tolerance, so a replay is refused as a replay, not as stale:
        # the default grows with the tolerance; a smaller value set is refused.
        least_replay_hours = 1 + 2 * tolerance // 3600
        replay_hours = env.get_int(
            "WEBHOOK_REPLAY_WINDOW_HOURS", max(24, least_replay_hours), maximum=24 * 366
        )
        if replay_hours < least_replay_hours:
            raise ConfigError(
                f"SCHEDULER_WEBHOOK_REPLAY_WINDOW_HOURS must be at least {least_replay_hours} "
                f"with SCHEDULER_WEBHOOK_TOLERANCE_SECONDS={tolerance}, got {replay_hours}"
            )
        return cls(
            service=service,
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051", shared=True),
            tick_seconds=env.get_float(
                "TICK_SECONDS", 60.0, minimum=MIN_TICK_SECONDS, maximum=86400
            ),
            batch_size=env.get_int("BATCH_SIZE", 100, minimum=1, maximum=10_000),
            delivery_timeout_seconds=env.get_float(
                "DELIVERY_TIMEOUT_SECONDS", 10.0, minimum=0.5, maximum=300
            ),
            min_interval_seconds=env.get_int(
                "MIN_INTERVAL_SECONDS", 60, minimum=1, maximum=MAX_INTERVAL_SECONDS
            ),
            webhook_tolerance_seconds=tolerance,
            webhook_max_body_bytes=env.get_int(
                "WEBHOOK_MAX_BODY_BYTES",
                WEBHOOK_BODY_BYTES_DEFAULT,
                minimum=1,
                maximum=MAX_WEBHOOK_BODY_BYTES,
            ),
            webhook_replay_window_hours=replay_hours,
            webhook_key=env.get_str("WEBHOOK_KEY"),
            history_days=env.get_int("HISTORY_DAYS", 30, minimum=1, maximum=3660),
        )
