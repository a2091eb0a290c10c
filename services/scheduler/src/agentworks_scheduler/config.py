"""Scheduler configuration, read once from SCHEDULER_* (and shared) environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.config import Env, ServiceConfig

DEFAULT_PORT = 50053
# Messaging refuses payloads above 1 MiB, so a webhook body can never be larger.
MAX_WEBHOOK_BODY_BYTES = 1024 * 1024


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
    # Key the webhook secrets are derived from; defaults to the internal key.
    webhook_key: str
    # Fired, cancelled and failed wake-ups are kept this long for listing.
    history_days: int

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = Env("SCHEDULER", dict(os.environ if environ is None else environ))
        service = ServiceConfig.from_env("scheduler", DEFAULT_PORT, env)
        tolerance = max(1, env.get_int("WEBHOOK_TOLERANCE_SECONDS", 300))
        return cls(
            service=service,
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051", shared=True),
            tick_seconds=max(0.01, env.get_float("TICK_SECONDS", 60.0)),
            batch_size=max(1, env.get_int("BATCH_SIZE", 100)),
            delivery_timeout_seconds=max(0.5, env.get_float("DELIVERY_TIMEOUT_SECONDS", 10.0)),
            min_interval_seconds=max(1, env.get_int("MIN_INTERVAL_SECONDS", 60)),
            webhook_tolerance_seconds=tolerance,
            webhook_max_body_bytes=min(
                MAX_WEBHOOK_BODY_BYTES,
                max(1, env.get_int("WEBHOOK_MAX_BODY_BYTES", 256 * 1024)),
            ),
            # Longer than the tolerance, so a replay is refused as a replay, not as stale.
            webhook_replay_window_hours=max(
                1 + 2 * tolerance // 3600, env.get_int("WEBHOOK_REPLAY_WINDOW_HOURS", 24)
            ),
            webhook_key=env.get_str("WEBHOOK_KEY") or service.internal_key,
            history_days=max(1, env.get_int("HISTORY_DAYS", 30)),
        )
