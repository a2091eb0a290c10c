"""The settings every gRPC service shares (`ServiceConfig`), read with `Env`.

Each service defines its own frozen dataclass in its `config.py`, embedding a
`ServiceConfig`, and builds it with `Env(prefix)` from `agentworks.core.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentworks.core.keys import SigningKey, TrustedKeys, keys_from_env
from agentworks.core.metrics import METRICS_TOKEN_VARIABLE
from agentworks.core.settings import (
    FALSE_WORDS,
    LOG_LEVELS,
    TRUE_WORDS,
    ConfigError,
    Env,
    check_address,
)
from agentworks.core.tls import Tls
from agentworks.server.liveness import DEFAULT_LAG_LIMIT_SECONDS, DEFAULT_STUCK_SECONDS

__all__ = [
    "FALSE_WORDS",
    "LOG_LEVELS",
    "TRUE_WORDS",
    "ConfigError",
    "Env",
    "ServiceConfig",
    "check_address",
]


@dataclass(frozen=True)
class ServiceConfig:
    """What every gRPC service needs; services embed it in their own config."""

    name: str
    listen: str
    database_url: str
    # This service's own private key (`<NAME>_SIGNING_KEY`, else AGENTWORKS_SIGNING_KEY)
    # and the public keys it verifies identities with (`<NAME>_TRUSTED_KEYS`, else
    # AGENTWORKS_TRUSTED_KEYS); None when not set (the start refuses that).
    signing_key: SigningKey | None
    trusted_keys: TrustedKeys | None = field(compare=False, repr=False)
    log_level: str
    log_json: bool
    drain_seconds: float
    pool_size: int
    metrics_listen: str
    # How often the service's database-wide gauges (queue depth, timers due, ...) are
    # recomputed; only while metrics are served.
    metrics_refresh_seconds: float = 5.0
    # TLS for the service's port and for the calls it makes (T5); plain text when empty.
    tls: Tls = field(default_factory=Tls)
    # host:port of a plain-text port serving health checking only (probes that cannot
    # speak TLS, such as the kubelet's); empty: none.
    health_listen: str = ""
    # B3: the event loop's lag past which health answers NOT_SERVING, and how long it may
    # not run at all before the process ends (status 3) to be restarted (0: never).
    lag_limit_seconds: float = DEFAULT_LAG_LIMIT_SECONDS
    stuck_seconds: float = DEFAULT_STUCK_SECONDS
    # The bearer token /metrics asks for (`<NAME>_METRICS_TOKEN`, else
    # AGENTWORKS_METRICS_TOKEN); empty: /metrics answers anyone who reaches its address.
    metrics_token: str = field(default="", repr=False)
    # The environment this was read from, for `Env.unknown` once the service's own
    # config has read the rest.
    env: Env | None = field(default=None, compare=False, repr=False)

    @property
    def signer(self) -> str:
        """The signer this service signs as (`service:<name>`; the gateway's is `gateway`)."""
        return "gateway" if self.name == "gateway" else f"service:{self.name}"

    def variable(self, name: str, *, shared: bool = False) -> str:
        """`<PREFIX>_<name>`, or the shared variable the setting was read from."""
        if self.env is None:
            return f"{self.name.upper()}_{name}"
        return self.env.variable(name, shared=shared)

    @classmethod
    def from_env(
        cls, name: str, default_port: int, env: Env | None = None, *, serves_grpc: bool = True
    ) -> ServiceConfig:
        """Read and check the settings every service has; a value out of its range (see
        docs/operations.md) is refused with a `ConfigError` naming the variable. A process
        that serves no gRPC (the gateway) has no client CA or health port settings."""
        env = env or Env(name.upper())
        signing_key, trusted_keys = keys_from_env(env)
        return cls(
            name=name,
            listen=env.get_address("LISTEN", f"127.0.0.1:{default_port}"),
            database_url=env.get_str("DATABASE_URL", shared=True),
            signing_key=signing_key,
            trusted_keys=trusted_keys,
            log_level=env.get_choice("LOG_LEVEL", "info", LOG_LEVELS, shared=True),
            log_json=env.get_bool("LOG_JSON", True, shared=True),
            drain_seconds=env.get_float("DRAIN_SECONDS", 10.0, minimum=0, maximum=3600),
            pool_size=env.get_int("POOL_SIZE", 10, minimum=1, maximum=1000),
            metrics_listen=env.get_address("METRICS_LISTEN", empty_host=True),
            metrics_refresh_seconds=env.get_float(
                "METRICS_REFRESH_SECONDS", 5.0, minimum=0.1, maximum=3600
            ),
            tls=Tls.from_env(env, server=serves_grpc),
            health_listen=env.get_address("HEALTH_LISTEN") if serves_grpc else "",
            lag_limit_seconds=env.get_float(
                "LOOP_LAG_LIMIT_SECONDS", DEFAULT_LAG_LIMIT_SECONDS, minimum=0.1, maximum=3600
            ),
            stuck_seconds=env.get_float(
                "LOOP_STUCK_SECONDS", DEFAULT_STUCK_SECONDS, minimum=0, maximum=86400
            ),
            metrics_token=env.get_str("METRICS_TOKEN").strip()
            or env.environ.get(METRICS_TOKEN_VARIABLE, "").strip(),
            env=env,
        )
