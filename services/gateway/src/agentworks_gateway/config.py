"""Gateway configuration, read once from `GATEWAY_*` variables into a frozen dataclass."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.keys import SigningKey
from agentworks.core.limits import MAX_WEBHOOK_BODY_BYTES, WEBHOOK_BODY_BYTES_DEFAULT
from agentworks.core.settings import Env
from agentworks.core.trust import MAX_LIFETIME_SECONDS
from agentworks.server.config import ServiceConfig
from agentworks_gateway.a2a_out.settings import A2AOutConfig
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig

DEFAULT_PORT = 8080
# Hosts and origins the MCP endpoint accepts by default (DNS-rebinding protection).
LOCAL_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOCAL_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
# The gateway relays long-polls of up to MAX_WAIT_SECONDS (C7, F7): its drain outlasts them, so a
# restart never cuts one (and waiting ones return at once on SIGTERM anyway).
DEFAULT_DRAIN_SECONDS = 30.0
DEFAULT_POOL_SIZE = 10
DEFAULT_IDENTITY_TTL_SECONDS = 120
# Below this an identity may expire between signing and the service's check (clock
# skew, a slow hop): every call would be refused "identity expired".
MIN_IDENTITY_TTL_SECONDS = 10
MAX_IDENTITY_TTL_SECONDS = MAX_LIFETIME_SECONDS
# An exchanged runtime credential's identity (T2, T4): short, so that a revoked
# credential's last identity ends soon (GATEWAY_RUNTIME_IDENTITY_TTL_SECONDS).
DEFAULT_RUNTIME_IDENTITY_TTL_SECONDS = 60


# A web console session (GATEWAY_CONSOLE_SESSION_SECONDS): a working day.
DEFAULT_CONSOLE_SESSION_SECONDS = 8 * 3600


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class Config:
    """Everything the gateway process needs, built once by `from_env`."""

    service: ServiceConfig
    messaging_address: str
    functions_address: str
    scheduler_address: str
    # `("*",)` turns the Host/Origin check off (e.g. behind a trusted reverse proxy).
    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    identity_ttl_seconds: int
    max_body_bytes: int
    # Webhook bodies above this get 413 before they are read (keep it equal to the
    # scheduler's SCHEDULER_WEBHOOK_MAX_BODY_BYTES).
    webhook_max_body_bytes: int
    # host:port for Prometheus /metrics (P4); empty = off.
    metrics_listen: str
    # HTTP server bounds (docs/operations.md, B6): open connections (past it the longest
    # idle one is closed to make room; 503 when none is idle), seconds an idle keep-alive
    # connection stays open, seconds a request body may take to arrive (past it 408),
    # bytes of request line and headers, seconds the request line and headers may take
    # (past it 408 and closed), connections from one client address (past it 429).
    max_connections: int = 1000
    idle_timeout_seconds: float = 5.0
    body_timeout_seconds: float = 30.0
    max_header_bytes: int = 16 * 1024
    header_timeout_seconds: float = 10.0
    max_connections_per_address: int = 128
    # Authenticated requests served at once (long-polls not counted while they wait) and
    # long-polls waiting at once (B6): past either 503 with Retry-After. Each principal's
    # own share of them is AGENTWORKS_PRINCIPAL_SHARES' (B7): past it 429.
    max_requests: int = 256
    max_waits: int = 512
    # How often the tokens behind open event streams are checked again, all in one
    # statement per replica: a revoked or expired token's streams end within this (A1).
    stream_recheck_seconds: float = 10.0
    # Lifetime of an identity exchanged for a runtime credential (POST /api/v1/identity).
    runtime_identity_ttl_seconds: int = DEFAULT_RUNTIME_IDENTITY_TTL_SECONDS
    # How long a web console session lasts after sign-in (V3); its token's revocation
    # or expiry ends it sooner.
    console_session_seconds: int = DEFAULT_CONSOLE_SESSION_SECONDS
    # Webhooks out (N2): the address policy, retries and bounds (GATEWAY_WEBHOOKS_*).
    webhooks_out: WebhooksOutConfig = dataclasses.field(default_factory=WebhooksOutConfig)
    # A2A outbound (X4): the operator's allow-list of external agents (GATEWAY_A2A_*).
    a2a_out: A2AOutConfig = dataclasses.field(default_factory=A2AOutConfig)

    @property
    def listen(self) -> str:
        """`GATEWAY_LISTEN`: host:port of the HTTP server."""
        return self.service.listen

    @property
    def database_url(self) -> str:
        """`GATEWAY_DATABASE_URL`, else `DATABASE_URL`."""
        return self.service.database_url

    @property
    def signing_key(self) -> SigningKey | None:
        """The gateway's own key, which signs its callers' identities (signer `gateway`)."""
        return self.service.signing_key

    @property
    def host_port(self) -> tuple[str, int]:
        """`GATEWAY_LISTEN` split into host and port (`[::1]:8080` works too)."""
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"GATEWAY_LISTEN must look like host:port, got {self.listen!r}")
        return host.strip("[]") or "127.0.0.1", int(port)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Read the gateway's configuration from `environ` (default: the process env)."""
        env = Env("GATEWAY") if environ is None else Env("GATEWAY", dict(environ))
        # The shared settings, with the gateway's own default drain and their ranges
        # (a pool of 0 would make every call wait, then fail "database busy").
        service = dataclasses.replace(
            ServiceConfig.from_env("gateway", DEFAULT_PORT, env, serves_grpc=False),
            drain_seconds=env.get_float(
                "DRAIN_SECONDS", DEFAULT_DRAIN_SECONDS, minimum=0, maximum=3600
            ),
            pool_size=env.get_int("POOL_SIZE", DEFAULT_POOL_SIZE, minimum=1, maximum=1000),
        )
        return cls(
            service=service,
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051"),
            functions_address=env.get_str("FUNCTIONS_ADDRESS", "127.0.0.1:50052"),
            scheduler_address=env.get_str("SCHEDULER_ADDRESS", "127.0.0.1:50053"),
            allowed_hosts=_split(env.get_str("ALLOWED_HOSTS")) or LOCAL_HOSTS,
            allowed_origins=_split(env.get_str("ALLOWED_ORIGINS")) or LOCAL_ORIGINS,
            identity_ttl_seconds=env.get_int(
                "IDENTITY_TTL_SECONDS",
                DEFAULT_IDENTITY_TTL_SECONDS,
                minimum=MIN_IDENTITY_TTL_SECONDS,
                maximum=MAX_IDENTITY_TTL_SECONDS,
            ),
            max_body_bytes=env.get_int(
                "MAX_BODY_BYTES", 1024 * 1024, minimum=1024, maximum=64 * 1024 * 1024
            ),
            # At most the scheduler's ceiling: messaging refuses larger payloads.
            webhook_max_body_bytes=env.get_int(
                "WEBHOOK_MAX_BODY_BYTES",
                WEBHOOK_BODY_BYTES_DEFAULT,
                minimum=1,
                maximum=MAX_WEBHOOK_BODY_BYTES,
            ),
            metrics_listen=service.metrics_listen,
            max_connections=env.get_int("MAX_CONNECTIONS", 1000, minimum=1, maximum=100_000),
            idle_timeout_seconds=env.get_float(
                "IDLE_TIMEOUT_SECONDS", 5.0, minimum=0.1, maximum=3600
            ),
            body_timeout_seconds=env.get_float(
                "BODY_TIMEOUT_SECONDS", 30.0, minimum=0.1, maximum=3600
            ),
            max_header_bytes=env.get_int(
                "MAX_HEADER_BYTES", 16 * 1024, minimum=1024, maximum=1024 * 1024
            ),
            header_timeout_seconds=env.get_float(
                "HEADER_TIMEOUT_SECONDS", 10.0, minimum=0.1, maximum=3600
            ),
            max_connections_per_address=env.get_int(
                "MAX_CONNECTIONS_PER_ADDRESS", 128, minimum=1, maximum=100_000
            ),
            max_requests=env.get_int("MAX_REQUESTS", 256, minimum=1, maximum=100_000),
            max_waits=env.get_int("MAX_WAITS", 512, minimum=1, maximum=100_000),
            stream_recheck_seconds=env.get_float(
                "STREAM_RECHECK_SECONDS", 10.0, minimum=0.1, maximum=60
            ),
            runtime_identity_ttl_seconds=env.get_int(
                "RUNTIME_IDENTITY_TTL_SECONDS",
                DEFAULT_RUNTIME_IDENTITY_TTL_SECONDS,
                minimum=MIN_IDENTITY_TTL_SECONDS,
                maximum=MAX_IDENTITY_TTL_SECONDS,
            ),
            console_session_seconds=env.get_int(
                "CONSOLE_SESSION_SECONDS",
                DEFAULT_CONSOLE_SESSION_SECONDS,
                minimum=60,
                maximum=30 * 24 * 3600,
            ),
            webhooks_out=WebhooksOutConfig.from_env(env),
            a2a_out=A2AOutConfig.from_env(env),
        )
