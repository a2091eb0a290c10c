"""Per-principal shares of one replica (B7): no principal can hold what serves the others.

Each principal (the identity's `principal`, e.g. `user:alice`) may hold at most
`requests` requests open at once on a replica, at most `waits` of them long-polls or
streams, and may create at most `creates_per_second` conversations and calls (with a
burst of `burst`). Past a share the request is refused at once, RESOURCE_EXHAUSTED with
reason PRINCIPAL_SHARE and a retry delay (RetryInfo; the gateway's Retry-After); nothing
is queued or stored.

The defaults (`DEFAULT`) hold for everyone; an operator gives a principal a share of its
own with `AGENTWORKS_PRINCIPAL_SHARES`, JSON such as
`{"user:etl": {"requests": 256, "creates_per_second": 500}, "default": {"waits": 16}}`
(missing fields keep the default's). Services (`service:*`) and the gateway act for many
principals and have no share: the principal they act for has.

The shares are per replica and kept in memory: n replicas admit n times the share. That is
the point: a share bounds what one principal can take of one process. A principal that
holds nothing (no request open, its creations refilled) is forgotten: its entry would say
nothing a new one does not.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from agentworks.core.errors import Busy, Reason

ENV = "AGENTWORKS_PRINCIPAL_SHARES"
# Principals that act for others: their share is the principal they act for.
UNSHARED_PREFIXES = ("service:", "gateway")


@dataclass(frozen=True)
class Share:
    """What one principal may hold of one replica."""

    # Requests open at once (long-polls and streams included).
    requests: int = 64
    # Long-polls and streams open at once.
    waits: int = 32
    # New conversations and calls: a sustained rate, and the burst above it.
    creates_per_second: float = 50.0
    burst: int = 200


DEFAULT = Share()


def parse_shares(text: str, variable: str = ENV) -> tuple[Share, dict[str, Share]]:
    """The default share and each principal's own, from the setting's JSON; ValueError
    naming what is wrong."""
    try:
        raw = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ValueError(f"{variable} is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{variable} must be a JSON object of principal -> share")
    names = {f.name: f.type for f in fields(Share)}
    default = DEFAULT
    own: dict[str, dict[str, Any]] = {}
    for principal, values in raw.items():
        if not isinstance(values, dict):
            raise ValueError(f"{variable}: the share of {principal!r} must be an object")
        for key, value in values.items():
            if key not in names:
                raise ValueError(
                    f"{variable}: {principal!r} has an unknown field {key!r} "
                    f"(known: {', '.join(names)})"
                )
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"{variable}: {principal}.{key} must be a positive number")
        own[principal] = values
    if "default" in own:
        default = replace(DEFAULT, **own.pop("default"))
    return default, {p.lower(): replace(default, **v) for p, v in own.items()}


# Idle entries are looked for once there are this many entries (then twice as many).
_FORGET_AT_LEAST = 1024


@dataclass
class _Held:
    requests: int = 0
    waits: int = 0
    tokens: float = math.nan
    refilled: float = 0.0


class Shares:
    """The shares of one replica, and what each principal holds of them now."""

    def __init__(self, default: Share = DEFAULT, own: Mapping[str, Share] | None = None) -> None:
        self.default = default
        self.own = dict(own or {})
        self._held: dict[str, _Held] = {}
        self._forget_at = _FORGET_AT_LEAST  # entries past which idle ones are dropped

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Shares:
        default, own = parse_shares((environ or os.environ).get(ENV, ""))
        return cls(default, own)

    def share(self, principal: str) -> Share:
        return self.own.get(principal.lower(), self.default)

    def waits_held(self, principal: str) -> int:
        """The long-polls and streams the principal holds open now."""
        held = self._held.get(principal)
        return held.waits if held is not None else 0

    def _state(self, principal: str) -> _Held:
        held = self._held.get(principal)
        if held is None:
            if len(self._held) >= self._forget_at:
                self._forget_idle()
            held = self._held[principal] = _Held()
        return held

    def _idle(self, principal: str, held: _Held) -> bool:
        """Whether the principal holds nothing: no request or wait open, and its bucket
        of creations full again, as a principal never seen starts (so its entry can go)."""
        if held.requests > 0 or held.waits > 0:
            return False
        if math.isnan(held.tokens):
            return True
        share = self.share(principal)
        refill = (time.monotonic() - held.refilled) * share.creates_per_second
        return held.tokens + refill >= share.burst

    def _release(self, principal: str, held: _Held) -> None:
        if self._idle(principal, held):
            self._held.pop(principal, None)

    def _forget_idle(self) -> None:
        """Drop every idle entry (a principal that created and has not come back since
        keeps one until then); run when the entries double, so its cost is amortised."""
        for principal, held in list(self._held.items()):
            self._release(principal, held)
        self._forget_at = max(_FORGET_AT_LEAST, 2 * len(self._held))

    @contextlib.contextmanager
    def request(self, principal: str) -> Iterator[None]:
        """Hold one of the principal's open requests while the block runs."""
        self.enter_request(principal)
        try:
            yield
        finally:
            self.leave_request(principal)

    def enter_request(self, principal: str) -> None:
        """Take one of the principal's open requests (give it back with `leave_request`),
        or raise `Busy`. The plain-call form of `request`, for the gRPC interceptor, where
        a generator-based context manager per request costs a measurable share."""
        if principal.startswith(UNSHARED_PREFIXES):
            return
        share = self.share(principal)
        held = self._state(principal)
        if held.requests >= share.requests:
            self._release(principal, held)
            raise _refusal(principal, f"{share.requests} requests open at once", "requests", 1.0)
        held.requests += 1

    def leave_request(self, principal: str) -> None:
        """Give back a request taken with `enter_request`."""
        if principal.startswith(UNSHARED_PREFIXES):
            return
        held = self._held.get(principal)
        if held is not None:
            held.requests -= 1
            self._release(principal, held)

    @contextlib.contextmanager
    def wait(self, principal: str) -> Iterator[None]:
        """Hold one of the principal's long-polls or streams while the block runs."""
        if principal.startswith(UNSHARED_PREFIXES):
            yield
            return
        share = self.share(principal)
        held = self._state(principal)
        if held.waits >= share.waits:
            self._release(principal, held)
            raise _refusal(
                principal, f"{share.waits} long-polls and streams open at once", "waits", 1.0
            )
        held.waits += 1
        try:
            yield
        finally:
            held.waits -= 1
            self._release(principal, held)

    def create(self, principal: str, what: str = "conversations and calls") -> None:
        """Take one of the principal's creations (a token bucket), or refuse it."""
        if principal.startswith(UNSHARED_PREFIXES):
            return
        share = self.share(principal)
        held = self._state(principal)
        now = time.monotonic()
        if math.isnan(held.tokens):
            held.tokens, held.refilled = float(share.burst), now
        held.tokens = min(
            float(share.burst), held.tokens + (now - held.refilled) * share.creates_per_second
        )
        held.refilled = now
        if held.tokens < 1.0:
            delay = (1.0 - held.tokens) / share.creates_per_second
            raise _refusal(
                principal,
                f"{share.creates_per_second:g} new {what} per second (bursts of {share.burst})",
                "creates_per_second",
                delay,
            )
        held.tokens -= 1.0


def _refusal(principal: str, limit: str, field: str, retry_after: float) -> Busy:
    return Busy(
        f"{principal} holds its share of this service: at most {limit}; nothing was "
        f"stored, retry in {max(retry_after, 0.001):.3g} s (an operator can give a principal "
        f"a larger share with {ENV})",
        reason=Reason.PRINCIPAL_SHARE,
        retry_after=retry_after,
        metadata={"share": field, "principal": principal},
    )


# The replica's shares, read once; `configure` replaces them (tests, a service's start).
_shares: Shares | None = None


def shares() -> Shares:
    global _shares
    if _shares is None:
        _shares = Shares.from_env()
    return _shares


def configure(value: Shares | None) -> None:
    global _shares
    _shares = value
