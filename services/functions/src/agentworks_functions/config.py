"""Functions configuration, read once from FUNCTIONS_* (and shared) environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.config import Env, ServiceConfig

DEFAULT_PORT = 50052
MAX_RUNNING_LIMIT = 1000


@dataclass(frozen=True)
class Config:
    """Everything the functions service reads from its environment."""

    service: ServiceConfig
    # Calls a target may run at once when its registration does not say (F5).
    default_running_limit: int
    # How often each replica looks for executions whose lease expired (F12).
    sweep_seconds: float
    # Waiting long-polls re-check the database at least this often, in case a
    # notification was missed while the listener reconnected.
    poll_fallback_seconds: float
    # Execution lease bounds a runtime may ask for (seconds).
    min_lease_seconds: int
    max_lease_seconds: int
    # Where completion notices for internal callers go (F13), and who we say we are.
    messaging_address: str
    principal: str
    # Delay before retrying a completion notice messaging could not take.
    notice_retry_seconds: float
    # Unfinished file uploads older than this are deleted by the sweeper.
    stale_upload_seconds: int
    # A call no runtime has claimed after this long ends `interrupted` and frees its
    # running slot (F5, F12); 0 keeps it waiting for a runtime forever.
    claim_timeout_seconds: float = 900.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = Env("FUNCTIONS", dict(os.environ if environ is None else environ))
        default_limit = env.get_int("DEFAULT_RUNNING_LIMIT", 4)
        if not 1 <= default_limit <= MAX_RUNNING_LIMIT:
            raise ValueError(
                f"FUNCTIONS_DEFAULT_RUNNING_LIMIT must be 1-{MAX_RUNNING_LIMIT}, "
                f"got {default_limit}"
            )
        min_lease = env.get_int("MIN_LEASE_SECONDS", 5)
        max_lease = env.get_int("MAX_LEASE_SECONDS", 300)
        if not 1 <= min_lease <= max_lease:
            raise ValueError(
                "FUNCTIONS_MIN_LEASE_SECONDS must be at least 1 and at most "
                f"FUNCTIONS_MAX_LEASE_SECONDS, got {min_lease} and {max_lease}"
            )
        return cls(
            service=ServiceConfig.from_env("functions", DEFAULT_PORT, env),
            default_running_limit=default_limit,
            sweep_seconds=env.get_float("SWEEP_SECONDS", 1.0),
            poll_fallback_seconds=env.get_float("POLL_FALLBACK_SECONDS", 5.0),
            min_lease_seconds=min_lease,
            max_lease_seconds=max_lease,
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051"),
            principal=env.get_str("PRINCIPAL", "service:functions"),
            notice_retry_seconds=env.get_float("NOTICE_RETRY_SECONDS", 5.0),
            stale_upload_seconds=env.get_int("STALE_UPLOAD_SECONDS", 3600),
            claim_timeout_seconds=max(0.0, env.get_float("CLAIM_TIMEOUT_SECONDS", 900.0)),
        )
