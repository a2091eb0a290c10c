"""What a connection may hold of the gateway before it is a request (B6).

uvicorn's h11 protocol with three bounds it lacks, kept in one `ConnectionGuard` per
server:

- a **header timeout**: a connection's request line and headers must arrive whole within
  `GATEWAY_HEADER_TIMEOUT_SECONDS` of its first byte (of the connection's opening for the
  first request); past it the connection is answered 408 and closed. uvicorn's keep-alive
  timer restarts on every byte, so a client that sent one header byte every 2 s held its
  connection for ever (1,100 of them answered 1,256 of a victim's 1,257 requests 503).
- a cap on **connections per client address** (`GATEWAY_MAX_CONNECTIONS_PER_ADDRESS`):
  past it a new connection from that address is answered 429 and closed at once.
- **idle connections make room**: past `GATEWAY_MAX_CONNECTIONS` open connections, the
  connection idle the longest (no request in progress: waiting for headers or between
  keep-alive requests) is closed to take the new one; only when every connection is
  serving a request is the new one answered 503. uvicorn's `limit_concurrency` counted
  idle connections against the requests being served; the requests being served are
  bounded in the application (`admission`), not here.

Chosen over hypercorn or granian: the gateway runs in its caller's event loop (tests and
`agentworks up` start it in-process) on uvicorn already, and these are three timers and
counters on the protocol uvicorn already runs; hypercorn's `read_timeout` restarts on
every byte as uvicorn's keep-alive does, and granian serves from its own worker processes.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any

import structlog
from prometheus_client import Counter
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger("agentworks.gateway")

CONNECTIONS_CLOSED = Counter(
    "agentworks_gateway_connections_closed_total",
    "Connections the gateway closed or refused before they were a request, by reason: "
    "header_timeout (headers not whole in time), per_address (the client address's cap), "
    "evicted_idle (the longest idle one, to make room), full (every connection busy).",
    ["reason"],
)
for _reason in ("header_timeout", "per_address", "evicted_idle", "full"):
    CONNECTIONS_CLOSED.labels(_reason)

# One log line per this many closures of a kind: an attack of thousands of connections
# must not become thousands of log lines (the metric counts each).
LOG_EVERY = 100


@dataclass
class ConnectionGuard:
    """The bounds, and what the server's connections hold of them now."""

    header_timeout: float
    per_address: int
    max_connections: int
    by_address: collections.Counter[str] = field(default_factory=collections.Counter)
    # Connections without a request in progress, the longest idle first.
    idle: dict[GuardedH11Protocol, None] = field(default_factory=dict)
    closed: collections.Counter[str] = field(default_factory=collections.Counter)

    def count(self, reason: str, client: Any) -> None:
        CONNECTIONS_CLOSED.labels(reason).inc()
        self.closed[reason] += 1
        if self.closed[reason] % LOG_EVERY == 1:
            log.warning(
                "connection.closed",
                reason=reason,
                client=client[0] if client else None,
                times=self.closed[reason],
                header_timeout=self.header_timeout,
                per_address=self.per_address,
                max_connections=self.max_connections,
            )


def _plain(status: bytes, text: str) -> bytes:
    body = text.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\nretry-after: 1\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    )


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol bound to `guard` (pass it as `uvicorn.Config(http=...)`)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a header timeout, a per-address cap and idle eviction."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address = ""
        self._counted = False
        self._seen_cycle: Any = None
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = False

    # ------------------------------------------------------------------ lifecycle

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        self._address = self.client[0] if self.client else ""
        guard.by_address[self._address] += 1
        self._counted = True
        if guard.by_address[self._address] > guard.per_address:
            guard.count("per_address", self.client)
            self._refuse(
                b"429 Too Many Requests",
                f"too many connections from {self._address}: at most {guard.per_address} "
                "at once (GATEWAY_MAX_CONNECTIONS_PER_ADDRESS); close some and retry",
            )
            return
        if len(self.connections) > guard.max_connections and not self._evict_idle():
            guard.count("full", self.client)
            self._refuse(
                b"503 Service Unavailable",
                f"the gateway serves {guard.max_connections} connections, all busy "
                "(GATEWAY_MAX_CONNECTIONS): retry",
            )
            return
        self._idle()
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        self.guard.idle.pop(self, None)
        if self._counted:
            self._counted = False
            self.guard.by_address[self._address] -= 1
            if self.guard.by_address[self._address] <= 0:
                del self.guard.by_address[self._address]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self._waiting():
            self._start_header_timer()  # the first byte of a keep-alive connection's next request
        self._header_bytes = True
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._header_bytes = False
        self._follow()

    # ------------------------------------------------------------------ state

    def _waiting(self) -> bool:
        """No request in progress: waiting for one's headers, or idle between requests."""
        return self.cycle is None or self.cycle.response_complete

    def _follow(self) -> None:
        if self.transport.is_closing():
            return
        if self._waiting():
            if self.cycle is not self._seen_cycle:  # a response just ended
                self._seen_cycle = self.cycle
                self._idle()
            return
        if self.cycle is not self._seen_cycle:  # a request's headers arrived whole
            self._seen_cycle = self.cycle
            self._stop_header_timer()
            self.guard.idle.pop(self, None)

    def _idle(self) -> None:
        self.guard.idle.pop(self, None)
        self.guard.idle[self] = None  # the end: idle the shortest

    def _evict_idle(self) -> bool:
        for other in self.guard.idle:
            if other is not self:
                self.guard.count("evicted_idle", other.client)
                other._close()
                return True
        return False

    # ------------------------------------------------------------------ timers

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self._header_timer = self.loop.call_later(self.guard.header_timeout, self._header_timeout)

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._waiting():
            return
        self.guard.count("header_timeout", self.client)
        if self._header_bytes:  # part of a request came: say why it is cut
            self._refuse(
                b"408 Request Timeout",
                f"the request's headers did not arrive whole within "
                f"{self.guard.header_timeout:g} s (GATEWAY_HEADER_TIMEOUT_SECONDS)",
            )
        else:
            self._close()

    # ------------------------------------------------------------------ closing

    def _refuse(self, status: bytes, text: str) -> None:
        if not self.transport.is_closing():
            self.transport.write(_plain(status, text))
        self._close()

    def _close(self) -> None:
        self._stop_header_timer()
        self.guard.idle.pop(self, None)
        if not self.transport.is_closing():
            self.transport.close()
