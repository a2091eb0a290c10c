"""The one error hierarchy services raise; `agentworks.server.rpc` maps it to gRPC codes.

Every error carries a message a person can act on: what was wrong and what to do. Where a
program must tell one refusal from another, the error also carries a machine-readable
`reason` (a `Reason`), sent as a `google.rpc.ErrorInfo` in the status details: clients
branch on it, never on the message's words.
"""

from __future__ import annotations

import enum

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

# The `domain` of our ErrorInfo details, and the trailer that carries them (gRPC's own).
ERROR_DOMAIN = "agentworks"
STATUS_DETAILS_KEY = "grpc-status-details-bin"


class Reason(enum.StrEnum):
    """Why a request was refused, for programs; the message says it for people."""

    # The call has ended (completed, failed, interrupted): nothing more can be reported.
    CALL_ENDED = "CALL_ENDED"
    # The call was cancelled by its caller or owner (F15): stop working on it.
    CALL_CANCELLED = "CALL_CANCELLED"
    # The turn's or execution's lease is no longer this runtime's (C11, F12).
    LEASE_LOST = "LEASE_LOST"
    # The target's running limit is reached (F5): nothing was queued.
    RUNNING_LIMIT = "RUNNING_LIMIT"
    # The caller holds its share of the target's running limit (fairness): nothing queued.
    CALLER_SHARE = "CALLER_SHARE"
    # The principal holds its share of this replica (open requests, long-polls and
    # streams, or new conversations and calls per second, B7): retry after the delay.
    PRINCIPAL_SHARE = "PRINCIPAL_SHARE"
    # A check ran past its deadline or its cost budget (B1, B2): nothing was stored.
    CHECK_BUDGET = "CHECK_BUDGET"
    # A field breaks a rule the proto states for it (buf.validate: a size, a range, a
    # count, required, a pattern); metadata names the field, the rule and the limit.
    FIELD_RULE = "FIELD_RULE"


class AgentWorksError(Exception):
    """Base of every error a service or client raises on purpose."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | str = "",
        retry_after: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        # Seconds to wait before retrying (google.rpc.RetryInfo; HTTP Retry-After).
        self.retry_after = retry_after
        # What a program needs besides the reason: the limit, the field (ErrorInfo).
        self.metadata = dict(metadata or {})


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


def from_status(
    code: grpc.StatusCode,
    message: str,
    reason: str = "",
    retry_after: float | None = None,
    metadata: dict[str, str] | None = None,
) -> AgentWorksError:
    """Rebuild the domain error a service raised from the status a client received."""
    return _BY_CODE.get(code, AgentWorksError)(
        message, reason=reason, retry_after=retry_after, metadata=metadata
    )


def status_details(exc: AgentWorksError, message: str) -> bytes:
    """The `grpc-status-details-bin` trailer for `exc`: a google.rpc.Status with its
    reason and metadata (ErrorInfo) and, when it has one, its retry delay (RetryInfo)."""
    details = []
    if exc.reason or exc.metadata:
        info = any_pb2.Any()
        info.Pack(
            error_details_pb2.ErrorInfo(
                reason=str(exc.reason), domain=ERROR_DOMAIN, metadata=exc.metadata
            )
        )
        details.append(info)
    if exc.retry_after is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(max(0, round(exc.retry_after * 1000)))
        delay = any_pb2.Any()
        delay.Pack(retry)
        details.append(delay)
    return status_pb2.Status(
        code=exc.code.value[0], message=message, details=details
    ).SerializeToString()


def _status_of(trailing_metadata: object) -> status_pb2.Status | None:
    for key, value in trailing_metadata or ():  # type: ignore[attr-defined]
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # a malformed trailer says nothing
            return None
        return status
    return None


def _retry_after_in(status: status_pb2.Status | None) -> float | None:
    for detail in status.details if status is not None else ():
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            return retry.retry_delay.ToMilliseconds() / 1000
    return None


def _info_in(status: status_pb2.Status | None) -> error_details_pb2.ErrorInfo | None:
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            return info
    return None


def retry_after_of(trailing_metadata: object) -> float | None:
    """The RetryInfo delay in a received status's trailers, in seconds, or None."""
    return _retry_after_in(_status_of(trailing_metadata))


def reason_of(trailing_metadata: object) -> str:
    """The ErrorInfo reason in a received status's trailers, or "" when there is none."""
    info = _info_in(_status_of(trailing_metadata))
    return info.reason if info is not None else ""


def from_trailers(
    code: grpc.StatusCode, message: str, trailing_metadata: object
) -> AgentWorksError:
    """`from_status` with the reason, retry delay and ErrorInfo metadata (the limit, the
    field, ...) a received status's trailers carry (its details parsed once)."""
    status = _status_of(trailing_metadata)
    info = _info_in(status)
    return from_status(
        code,
        message,
        info.reason if info is not None else "",
        _retry_after_in(status),
        dict(info.metadata) if info is not None else {},
    )
