"""Functions configuration, read once from FUNCTIONS_* (and shared) environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.limits import MAX_RUNNING_LIMIT
from agentworks.core.settings import ConfigError, Env
from agentworks.server.config import ServiceConfig

DEFAULT_PORT = 50052
# Shortest sweep, long-poll re-check and notice retry intervals: below, a loop would
# spin on the database.
MIN_INTERVAL_SECONDS = 0.05
MAX_INTERVAL_SECONDS = 3600
# Longest execution lease a runtime may be granted (FUNCTIONS_MAX_LEASE_SECONDS).
MAX_LEASE_LIMIT = 86400


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
    # Fairness (docs/functions.md): the share of a target's running limit one caller may
    # hold (100 = all of it, as F5 promises a single caller), and how long a human-input
    # question may go unanswered before its call ends `failed` (0 = no limit).
    caller_share_percent: int = 100
    question_timeout_seconds: float = 0.0
    # The most bytes a target's output files (of all its calls) may take (T8); 0: no limit.
    target_file_quota_bytes: int = 10 * 1024**3
    # The check pool (B2): worker processes for costly schema checks, the hard deadline
    # of one check, and how many workers one principal may hold at once.
    check_workers: int = 2
    check_deadline_seconds: float = 2.0
    check_share: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        env = Env("FUNCTIONS", dict(os.environ if environ is None else environ))
        min_lease = env.get_int("MIN_LEASE_SECONDS", 5, minimum=1, maximum=MAX_LEASE_LIMIT)
        max_lease = env.get_int("MAX_LEASE_SECONDS", 300, minimum=1, maximum=MAX_LEASE_LIMIT)
        if min_lease > max_lease:
            raise ConfigError(
                "FUNCTIONS_MIN_LEASE_SECONDS must be at most FUNCTIONS_MAX_LEASE_SECONDS, "
                f"got {min_lease} and {max_lease}"
            )
        return cls(
            service=ServiceConfig.from_env("functions", DEFAULT_PORT, env),
            default_running_limit=env.get_int(
                "DEFAULT_RUNNING_LIMIT", 4, minimum=1, maximum=MAX_RUNNING_LIMIT
            ),
            sweep_seconds=env.get_float(
                "SWEEP_SECONDS", 1.0, minimum=MIN_INTERVAL_SECONDS, maximum=MAX_INTERVAL_SECONDS
            ),
            poll_fallback_seconds=env.get_float(
                "POLL_FALLBACK_SECONDS",
                5.0,
                minimum=MIN_INTERVAL_SECONDS,
                maximum=MAX_INTERVAL_SECONDS,
            ),
            min_lease_seconds=min_lease,
            max_lease_seconds=max_lease,
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051"),
            principal=env.get_str("PRINCIPAL", "service:functions"),
            notice_retry_seconds=env.get_float(
                "NOTICE_RETRY_SECONDS",
                5.0,
                minimum=MIN_INTERVAL_SECONDS,
                maximum=MAX_INTERVAL_SECONDS,
            ),
            # Below a minute, an upload still being written could be purged.
            stale_upload_seconds=env.get_int(
                "STALE_UPLOAD_SECONDS", 3600, minimum=60, maximum=30 * 86400
            ),
            # 0: wait for a runtime forever.
            claim_timeout_seconds=env.get_float(
                "CLAIM_TIMEOUT_SECONDS", 900.0, minimum=0, maximum=30 * 86400
            ),
            caller_share_percent=env.get_int("CALLER_SHARE_PERCENT", 100, minimum=1, maximum=100),
            question_timeout_seconds=env.get_float(
                "QUESTION_TIMEOUT_SECONDS", 0.0, minimum=0, maximum=30 * 86400
            ),
            target_file_quota_bytes=env.get_int(
                "TARGET_FILE_QUOTA_BYTES", 10 * 1024**3, minimum=0, maximum=2**62
            ),
            check_workers=env.get_int("CHECK_WORKERS", 2, minimum=1, maximum=64),
            check_deadline_seconds=env.get_float(
                "CHECK_DEADLINE_SECONDS", 2.0, minimum=0.1, maximum=600
            ),
            check_share=env.get_int("CHECK_SHARE", 1, minimum=1, maximum=64),
        )
