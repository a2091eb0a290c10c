"""The one error hierarchy services raise; `agentworks.server.rpc` maps it to gRPC codes.

Every error carries a message a person can act on: what was wrong and what to do.
"""

from __future__ import annotations

import grpc


class AgentWorksError(Exception):
    """Base of every error a service or client raises on purpose."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(AgentWorksError):
    """The request is malformed or out of bounds; nothing was stored."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AgentWorksError):
    """The thing does not exist, or the caller may not know that it does."""

    code = grpc.StatusCode.NOT_FOUND


class Conflict(AgentWorksError):
    """A retry key was reused with different content, or the thing already exists."""

    code = grpc.StatusCode.ALREADY_EXISTS


class PreconditionFailed(AgentWorksError):
    """The request is valid but the current state refuses it."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Busy(AgentWorksError):
    """A limit is reached; retry later. Nothing was queued."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unauthenticated(AgentWorksError):
    """The identity is missing, expired or badly signed."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(AgentWorksError):
    """The caller is known but may not do this."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unavailable(AgentWorksError):
    """A dependency (usually the database) cannot be reached; safe to retry."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AgentWorksError):
    """The call took longer than its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Internal(AgentWorksError):
    """A bug or an unexpected failure; the message says what failed."""

    code = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[AgentWorksError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        Conflict,
        PreconditionFailed,
        Busy,
        Unauthenticated,
        PermissionDenied,
        Unavailable,
        DeadlineExceeded,
        Internal,
    )
}


# What a delivery refused with one of these gets on every retry too: callers record it
# as failed instead of trying again (the scheduler's occurrences, functions' notices).
REFUSED_FOR_GOOD: tuple[type[AgentWorksError], ...] = (InvalidArgument, NotFound, Conflict)


def from_status(code: grpc.StatusCode, message: str) -> AgentWorksError:
    """Rebuild the domain error a service raised from the status a client received."""
    return _BY_CODE.get(code, AgentWorksError)(message)
