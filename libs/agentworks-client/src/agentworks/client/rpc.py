"""The client side of gRPC: channel options and the base of the typed clients."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import grpc
import structlog

from agentworks.client.credentials import CredentialIdentity
from agentworks.core import errors
from agentworks.core.identity import Forwarded, Minter
from agentworks.core.limits import MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES
from agentworks.core.tls import Tls
from agentworks.core.wire import ANSWERED_KEY, REQUEST_ID_KEY

# What gRPC's connection errors say when TLS is at fault (not worth a retry). A transport
# error's text is all gRPC gives: no ErrorInfo (no service answered) and no status code of
# its own (UNAVAILABLE, as for a server that is down), so these words are read. Every
# status one of our services sends is read by its code and ErrorInfo instead (`_answered`).
_TLS_FAILURE_WORDS = ("handshake", "ssl_error", "certificate_verify", "hostname verification")
# gRPC's own refusal of a message past a receive limit (either side's): RESOURCE_EXHAUSTED
# with these words and nothing else; the same code without them is another transport
# limit (e.g. trailers past their budget: "Stream removed").
_TOO_LARGE_WORDS = "larger than max"

_RETRY_SERVICE_CONFIG = """{
  "methodConfig": [{
    "name": [{}],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.1s",
      "maxBackoff": "2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}"""


def channel_options(*, round_robin: bool = True) -> list[tuple[str, Any]]:
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.enable_retries", 1),
        ("grpc.service_config", _RETRY_SERVICE_CONFIG),
        ("grpc.keepalive_time_ms", 30_000),
        # Reconnect quickly after a replica restarts: with gRPC's default backoff (up to
        # 120 s) a channel can stay failing long after the server is back.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 2_000),
    ]
    if round_robin:
        options.append(("grpc.lb_policy_name", "round_robin"))
    return options


def channel_target(addresses: str) -> str:
    """`host:port[,host:port...]` as a gRPC target; several addresses are balanced."""
    parts = [a.strip() for a in addresses.split(",") if a.strip()]
    if len(parts) <= 1:
        return parts[0] if parts else addresses
    return "ipv4:" + ",".join(parts)


def open_channel(
    addresses: str, tls: Tls | None = None, *, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A channel to `host:port[,host:port...]` with our options (and `options`): TLS when
    `tls` trusts a CA, mutual TLS when it holds a certificate too, else plain text."""
    target = channel_target(addresses)
    merged = [*channel_options(), *options]
    if tls is None or not tls.calls_tls:
        return grpc.aio.insecure_channel(target, options=merged)
    merged += tls.channel_options()
    if target != addresses.strip() and not tls.server_name:
        # A list of replicas (`ipv4:a,b`) has no host name of its own to check: the
        # first address's host is checked (its certificates name their IP addresses).
        merged.append(
            ("grpc.ssl_target_name_override", addresses.split(",")[0].rpartition(":")[0].strip())
        )
    return grpc.aio.secure_channel(target, tls.channel_credentials(), options=merged)


def _tls_failure(details: str) -> bool:
    """Whether the channel's words say that a TLS handshake or check failed."""
    lowered = details.lower()
    return any(word in lowered for word in _TLS_FAILURE_WORDS)


def _too_large(exc: grpc.aio.AioRpcError, details: str) -> bool:
    """Whether gRPC itself (not a service) refused a message past a receive limit."""
    return exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and _TOO_LARGE_WORDS in details


def _answered(exc: grpc.aio.AioRpcError) -> bool:
    """Whether one of our services sent this status (see ANSWERED_KEY)."""
    return any(key == ANSWERED_KEY for key, _ in exc.trailing_metadata() or ())


class ServiceClient:
    """Base of the typed clients: signed identity, deadlines, one error type.

    Subclasses expose snake_case methods; every failure surfaces as an
    `agentworks.core.errors.AgentWorksError` subclass. Given an address, the client
    opens its own channel, over TLS when `tls` trusts a CA (`open_channel`).
    """

    stub_class: Any = None
    # The largest request the service receives (B8): a larger one is refused here, before
    # it is sent, in the words gRPC's own refusal gets below.
    max_request_bytes = MAX_REQUEST_BYTES

    def __init__(
        self,
        address: str | None = None,
        *,
        identity: Minter | Forwarded | CredentialIdentity,
        channel: grpc.aio.Channel | None = None,
        timeout: float = 30.0,
        tls: Tls | None = None,
    ) -> None:
        if channel is None:
            if not address:
                raise ValueError("an address or a channel is required")
            channel = open_channel(address, tls)
            self._owns_channel = True
        else:
            self._owns_channel = False
        self.channel = channel
        self.identity = identity
        self.timeout = timeout
        self.stub = self.stub_class(channel)

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        md = self.identity.metadata()
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if request_id:
            md = (*md, (REQUEST_ID_KEY, str(request_id)))
        return md

    def _service(self) -> str:
        return str(type(self.stub).__name__).removesuffix("ServiceStub").lower()

    async def _unary(self, method: str, request: Any, *, timeout: float | None = None) -> Any:
        timeout = timeout or self.timeout
        size = len(request) if isinstance(request, bytes) else request.ByteSize()
        if size > self.max_request_bytes:
            raise errors.InvalidArgument(
                f"{method}'s request is larger than the {self._service()} service receives "
                f"({size} bytes; at most {self.max_request_bytes}); send less in one request",
                reason=errors.Reason.REQUEST_LIMIT,
                metadata={"limit": str(self.max_request_bytes)},
            )
        try:
            return await getattr(self.stub, method)(
                request, metadata=self._metadata(), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            details = exc.details() or exc.code().name
            if _answered(exc):  # the service's own words, already saying what to do
                raise errors.from_trailers(exc.code(), details, exc.trailing_metadata()) from None
            # The channel's own words ("connections to all backends failing", "Deadline
            # Exceeded"): say which service, and that a retry is the remedy. Only TLS
            # failures and gRPC's size refusal are told apart by their words: gRPC gives
            # a transport error no reason (see _TLS_FAILURE_WORDS).
            service = self._service()
            if exc.code() == grpc.StatusCode.UNAVAILABLE and _tls_failure(details):
                details = (
                    f"no TLS connection to the {service} service ({details}); check the TLS "
                    "settings (certificates, CA, server name) of both sides"
                )
            elif _too_large(exc, details):
                # gRPC's own refusal of a message past a receive limit: not busy, too big.
                raise errors.InvalidArgument(
                    f"{method}'s request is larger than the {service} service receives "
                    f"({details}); send less in one request",
                    reason=errors.Reason.REQUEST_LIMIT,
                ) from None
            elif exc.code() == grpc.StatusCode.UNAVAILABLE:
                details = f"the {service} service is unavailable ({details}); retry shortly"
            elif exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                details = (
                    f"the {service} service did not answer {method} within {timeout:g} s "
                    f"({details}); retry shortly"
                )
            unreached = exc.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
            raise errors.from_status(
                exc.code(),
                details,
                errors.Reason.UNREACHABLE if unreached else "",
                metadata={"service": service} if unreached else None,
            ) from None
