"""What authenticated work may hold of one gateway at once (B6, B7).

Two pools, so that idle connections (`connections`) and waiting long-polls cannot use up
what serves requests:

- **requests** (`GATEWAY_MAX_REQUESTS`): authenticated API and MCP requests being served
  at once, a long-poll not counted while it waits;
- **waits** (`GATEWAY_MAX_WAITS`): long-polls waiting at once (reads and status with
  `wait_seconds`, waiting calls) and open event streams (`streams`, the console's live
  pages), which never hold a request.

Past a pool a request is answered 503 with `Retry-After` at once. Within them each
principal holds its own share (`agentworks.server.shares`): requests open at once and
long-polls waiting at once; past it 429 with `Retry-After`. One token holding 1,100
reads with `wait_seconds=25` used to make 434 of another user's 441 requests fail.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from agentworks.core import errors
from agentworks.server.shares import shares

# The principal a tool call runs for (set by `tools.call_tool`): `Gateway.long_poll`
# takes its wait from that principal's share.
CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("caller", default=None)


@dataclass
class _Ticket:
    counted: bool = True


_TICKET: contextvars.ContextVar[_Ticket | None] = contextvars.ContextVar("ticket", default=None)


class Admission:
    """The gateway's request and wait pools, and the principals' shares of them."""

    def __init__(self, max_requests: int, max_waits: int) -> None:
        self.max_requests = max_requests
        self.max_waits = max_waits
        self.requests = 0
        self.waits = 0

    @contextlib.contextmanager
    def request(self, principal: str) -> Iterator[None]:
        """Hold one of the pool's requests and one of the principal's while the block runs;
        Unavailable (503) past the pool, Busy (429) past the principal's share."""
        if self.requests >= self.max_requests:
            raise _full("requests", f"is serving {self.max_requests} requests")
        with shares().request(principal):
            ticket = _Ticket()
            token = _TICKET.set(ticket)
            self.requests += 1
            try:
                yield
            finally:
                if ticket.counted:
                    self.requests -= 1
                _TICKET.reset(token)

    @contextlib.contextmanager
    def wait(self) -> Iterator[None]:
        """Hold one of the wait pool's long-polls and one of the caller's (`CALLER`) while
        the block waits; the request it is part of leaves the request pool meanwhile."""
        if self.waits >= self.max_waits:
            raise _full(
                "waits", f"holds {self.max_waits} long-polls", ", or ask without wait_seconds"
            )
        principal = CALLER.get()
        with shares().wait(principal) if principal else contextlib.nullcontext():
            ticket = _TICKET.get()  # the request this wait is part of, if still counted
            moved = ticket if ticket is not None and ticket.counted else None
            if moved is not None:
                moved.counted = False
                self.requests -= 1
            self.waits += 1
            try:
                yield
            finally:
                self.waits -= 1
                if moved is not None:
                    moved.counted = True
                    self.requests += 1

    @contextlib.contextmanager
    def stream(self, principal: str) -> Iterator[None]:
        """Hold one of the wait pool's places and one of the principal's long-polls and
        streams while an event stream is open (N1, N4); it holds no request. Unavailable
        (503) past the pool, Busy (429) past the principal's share."""
        if self.waits >= self.max_waits:
            raise _full(
                "waits", f"holds {self.max_waits} long-polls and streams", "; or poll instead"
            )
        with shares().wait(principal):
            self.waits += 1
            try:
                yield
            finally:
                self.waits -= 1


def _full(pool: str, holding: str, advice: str = "") -> errors.Unavailable:
    """The refusal past one of the gateway's pools: 503, retry in 1 s."""
    setting = f"GATEWAY_MAX_{pool.upper()}"
    return errors.Unavailable(
        f"the gateway {holding} at once, its limit ({setting}): retry in 1 s{advice}",
        retry_after=1.0,
        metadata={"pool": pool, "setting": setting},
        reason=errors.Reason.OVERLOADED,
    )
