"""The settings every gRPC service shares (`ServiceConfig`), read with `Env`.

Each service defines its own frozen dataclass in its `config.py`, embedding a
`ServiceConfig`, and builds it with `Env(prefix)` from `agentworks.client.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentworks.client.settings import (
    FALSE_WORDS,
    LOG_LEVELS,
    TRUE_WORDS,
    ConfigError,
    Env,
    check_address,
)
from agentworks.client.tls import Tls

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
    internal_key: str
    log_level: str
    log_json: bool
    drain_seconds: float
    pool_size: int
    metrics_listen: str
    # How often the service's database-wide gauges (queue depth, timers due, ...) are
    # recomputed; only while metrics are served.
    metrics_refresh_seconds: float = 5.0
    # Identities signed with these keys are accepted too (key rotation); the service
    # itself signs only with `internal_key`.
    accepted_keys: tuple[str, ...] = ()
    # TLS for the service's port and for the calls it makes (T5); plain text when empty.
    tls: Tls = field(default_factory=Tls)
    # host:port of a plain-text port serving health checking only (probes that cannot
    # speak TLS, such as the kubelet's); empty: none.
    health_listen: str = ""
    # The environment this was read from, for `Env.unknown` once the service's own
    # config has read the rest.
    env: Env | None = field(default=None, compare=False, repr=False)

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
        return cls(
            name=name,
            listen=env.get_address("LISTEN", f"127.0.0.1:{default_port}"),
            database_url=env.get_str("DATABASE_URL", shared=True),
            internal_key=env.get_str("INTERNAL_KEY", shared=False)
            or env.environ.get("AGENTWORKS_INTERNAL_KEY", ""),
            log_level=env.get_choice("LOG_LEVEL", "info", LOG_LEVELS, shared=True),
            log_json=env.get_bool("LOG_JSON", True, shared=True),
            drain_seconds=env.get_float("DRAIN_SECONDS", 10.0, minimum=0, maximum=3600),
            pool_size=env.get_int("POOL_SIZE", 10, minimum=1, maximum=1000),
            metrics_listen=env.get_address("METRICS_LISTEN", empty_host=True),
            metrics_refresh_seconds=env.get_float(
                "METRICS_REFRESH_SECONDS", 5.0, minimum=0.1, maximum=3600
            ),
            accepted_keys=tuple(
                k.strip()
                for k in env.environ.get("AGENTWORKS_ACCEPTED_INTERNAL_KEYS", "").split(",")
                if k.strip()
            ),
            tls=Tls.from_env(env, server=serves_grpc),
            health_listen=env.get_address("HEALTH_LISTEN") if serves_grpc else "",
            env=env,
        )
