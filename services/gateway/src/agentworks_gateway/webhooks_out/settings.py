"""The webhooks-out settings (`GATEWAY_WEBHOOKS_*`), read once with the gateway's config."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from agentworks.core.settings import ConfigError, Env

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_RETRY_SECONDS = 24 * 3600
DEFAULT_KEEP_SECONDS = 7 * 24 * 3600


def parse_networks(value: str, variable: str) -> tuple[IPNetwork, ...]:
    """`127.0.0.1/32,10.0.0.0/8,::1` as networks; a bad entry is a ConfigError naming it."""
    networks: list[IPNetwork] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        try:
            networks.append(ipaddress.ip_network(part, strict=False))
        except ValueError:
            raise ConfigError(
                f"{variable}: {part!r} is not an IP address or network (e.g. 10.0.0.0/8)"
            ) from None
    return tuple(networks)


@dataclass(frozen=True)
class WebhooksOutConfig:
    """How the gateway sends webhooks out (docs/operations.md, Webhooks out)."""

    # Networks the operator allows besides public addresses (loopback, private, ...);
    # plain http is allowed only to addresses in these.
    allow: tuple[IPNetwork, ...] = field(default=())
    # How long a delivery is retried after its event (or a redeliver) before gave_up.
    retry_seconds: float = DEFAULT_RETRY_SECONDS
    # How long a finished delivery (and an ended call's A2A push config) is kept, listed
    # and redeliverable, before it is deleted (webhooks_out.retention).
    keep_seconds: float = DEFAULT_KEEP_SECONDS
    # The first retry's delay; each next one doubles, up to max_retry_interval_seconds.
    first_retry_seconds: float = 5.0
    max_retry_interval_seconds: float = 3600.0
    # One attempt (connect, send, answer) at most this long.
    timeout_seconds: float = 10.0
    # At most this much of a receiver's answer is read.
    max_response_bytes: int = 64 * 1024
    # How often a replica looks for feeds nobody follows and for due deliveries it was
    # not told about (its own new deliveries and retries wake it at once).
    poll_seconds: float = 5.0
    # A feed's lease: a replica that stops (kill -9) gives its feeds up after this.
    lease_seconds: float = 30.0
    # Endpoints one principal may have, and attempts one replica makes at once.
    max_endpoints: int = 20
    concurrency: int = 16
    # A2A push-notification configs (X2), delivered by webhooks out: served, and
    # advertised in the agent cards, when on (`GATEWAY_A2A_PUSH`).
    a2a_push: bool = True

    @classmethod
    def from_env(cls, env: Env) -> WebhooksOutConfig:
        """Read `GATEWAY_WEBHOOKS_*` (see docs/operations.md)."""
        return cls(
            allow=parse_networks(env.get_str("WEBHOOKS_ALLOW"), env.variable("WEBHOOKS_ALLOW")),
            retry_seconds=env.get_float(
                "WEBHOOKS_RETRY_SECONDS", DEFAULT_RETRY_SECONDS, minimum=1, maximum=30 * 86400
            ),
            keep_seconds=env.get_float(
                "WEBHOOKS_KEEP_SECONDS", DEFAULT_KEEP_SECONDS, minimum=1, maximum=365 * 86400
            ),
            first_retry_seconds=env.get_float(
                "WEBHOOKS_FIRST_RETRY_SECONDS", 5.0, minimum=0.05, maximum=3600
            ),
            max_retry_interval_seconds=env.get_float(
                "WEBHOOKS_MAX_RETRY_INTERVAL_SECONDS", 3600.0, minimum=0.05, maximum=86400
            ),
            timeout_seconds=env.get_float(
                "WEBHOOKS_TIMEOUT_SECONDS", 10.0, minimum=0.1, maximum=60
            ),
            max_response_bytes=env.get_int(
                "WEBHOOKS_MAX_RESPONSE_BYTES", 64 * 1024, minimum=0, maximum=1024 * 1024
            ),
            poll_seconds=env.get_float("WEBHOOKS_POLL_SECONDS", 5.0, minimum=0.05, maximum=3600),
            lease_seconds=env.get_float("WEBHOOKS_LEASE_SECONDS", 30.0, minimum=1, maximum=3600),
            max_endpoints=env.get_int("WEBHOOKS_MAX_ENDPOINTS", 20, minimum=1, maximum=10_000),
            concurrency=env.get_int("WEBHOOKS_CONCURRENCY", 16, minimum=1, maximum=1000),
            a2a_push=env.get_bool("A2A_PUSH", True),
        )

    def retry_delay(self, attempts: int) -> float:
        """Seconds before the next attempt after `attempts` failed ones (exponential)."""
        delay = self.first_retry_seconds * 2 ** min(max(attempts - 1, 0), 30)
        return min(delay, self.max_retry_interval_seconds)
