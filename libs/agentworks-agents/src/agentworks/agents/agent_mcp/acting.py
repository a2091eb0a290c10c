"""A turn's or execution's context acting with its capability only (T3, L2).

The agent process's tools must have no more authority than the process's own
capability. `capability_view(ctx)` is the same context (its state, its counters, its
stop events: all shared with `ctx`) whose service clients send the turn's or
execution's current capability instead of the runtime's identity, on the runtime's
channels. Once the lease ends, the services refuse every call it makes.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, TypeVar

from agentworks.core.errors import Unauthenticated
from agentworks.core.identity import METADATA_KEY, Forwarded

C = TypeVar("C")

# The clients a context holds (TurnContext: all three; ExecutionContext: `client`).
_CLIENTS = ("client", "scheduler", "functions")


class LiveCapability(Forwarded):
    """Sends the item's capability as it is now (renewed with each heartbeat)."""

    def __init__(self, current: Callable[[], str], what: str) -> None:
        self._current = current
        self._what = what

    def metadata(self) -> tuple[tuple[str, str], ...]:
        token = self._current()
        if not token:
            raise Unauthenticated(
                f"{self._what} has no capability (the service issued none: the runtime is "
                "not an agent or workflow), so its agent tools can do nothing"
            )
        return ((METADATA_KEY, token),)


class _View:
    """`ctx` with other clients: every other attribute, method and property is `ctx`'s,
    run against this view (so its methods use the view's clients) and stored on `ctx`."""

    def __init__(self, ctx: Any, clients: dict[str, Any]) -> None:
        object.__setattr__(self, "_ctx", ctx)
        for name, client in clients.items():
            object.__setattr__(self, name, client)

    def __getattr__(self, name: str) -> Any:
        ctx = object.__getattribute__(self, "_ctx")
        found = inspect.getattr_static(type(ctx), name, None)
        if isinstance(found, property) and found.fget is not None:
            return found.fget(self)
        if isinstance(found, types.FunctionType):
            return types.MethodType(found, self)
        return getattr(ctx, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_ctx"), name, value)


def capability_view(ctx: C, what: str) -> C:
    """`ctx` (a TurnContext or ExecutionContext) acting with its capability only."""
    identity = LiveCapability(lambda: str(ctx.capability), what)  # type: ignore[attr-defined]
    clients = {}
    for name in _CLIENTS:
        client = getattr(ctx, name, None)
        if client is not None:
            clients[name] = type(client)(
                channel=client.channel, identity=identity, timeout=client.timeout
            )
    return _View(ctx, clients)  # type: ignore[return-value]
