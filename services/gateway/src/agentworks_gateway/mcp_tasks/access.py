"""How the MCP task methods reach calls and conversations: as the request's caller.

The gateway gives each request's caller (the bearer token's principal, as for the
tools); the functions and messaging services decide what that caller may see (A3). An
error of theirs becomes the JSON-RPC error the Tasks extension names: a call that is
not there (or not visible) is invalid params.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import PAST_EVERY_PAGE
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.functions.v1 import functions_pb2 as f

Ctx = ServerRequestContext[Any, Any]

# Refusals that say the request named something wrong (the call, the question).
_CLIENT_FAULTS = (
    errors.NotFound,
    errors.InvalidArgument,
    errors.PreconditionFailed,
    errors.Conflict,
)


@dataclass(frozen=True)
class Access:
    """The gateway's services, called as the caller of an MCP request."""

    gateway: Any
    caller: Callable[[Ctx], Identity]

    def functions(self, ctx: Ctx) -> FunctionsClient:
        return self.gateway.functions(self.caller(ctx))  # type: ignore[no-any-return]

    def messaging(self, ctx: Ctx) -> MessagingClient:
        return self.gateway.messaging(self.caller(ctx))  # type: ignore[no-any-return]


@contextlib.contextmanager
def as_protocol_errors(what: str) -> Any:
    """A service's refusal as a JSON-RPC error: the request's fault is invalid params
    (with the refusal's reason and metadata as data), anything else internal."""
    try:
        yield
    except errors.AgentWorksError as exc:
        code = types.INVALID_PARAMS if isinstance(exc, _CLIENT_FAULTS) else types.INTERNAL_ERROR
        data = {"reason": str(exc.reason or ""), "metadata": exc.metadata}
        raise MCPError(code, f"{what}: {exc.message}", data) from None


async def status(client: FunctionsClient, call_id: str, *, wait: int = 0,
                 seen_version: int | None = None) -> f.CallStatus:  # fmt: skip
    """A call's status without its message and event pages (the task needs neither): the
    cursors past every page, so a wait is woken by a change of the call alone."""
    return await client.get_status(
        call_id,
        after=PAST_EVERY_PAGE,
        message_limit=1,
        after_event=PAST_EVERY_PAGE,
        event_limit=1,
        wait_seconds=wait,
        seen_version=seen_version,
    )


async def changes(client: FunctionsClient, call_id: str) -> AsyncIterator[f.CallStatus]:
    """The call's status now and after each change, until it ends (N1): the call's
    push stream (`FunctionsClient.watch_call`), past every message and event page (the
    task needs neither), resumed by the client on any replica."""
    async for change in client.watch_call(
        call_id, after=PAST_EVERY_PAGE, after_event=PAST_EVERY_PAGE
    ):
        yield change.status
