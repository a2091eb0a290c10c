"""The one error hierarchy services raise; `agentworks.server.rpc` maps it to gRPC codes.

Every error carries a message a person can act on: what was wrong and what to do. Where a
program must tell one refusal from another, the error also carries a machine-readable
`reason` (a `Reason`), sent as a `google.rpc.ErrorInfo` in the status details: clients
branch on it, never on the message's words.
"""

from __future__ import annotations

import enum
from typing import Any

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
    # A field is well formed but its value does not fit: it contradicts another field,
    # the caller's kind or the thing it names (inputs against a schema, a rule that
    # never fires); metadata names the field.
    INVALID_VALUE = "INVALID_VALUE"
    # The request could not be read as its format (JSON, a JSON object, UTF-8).
    MALFORMED = "MALFORMED"
    # The request as a whole passes a limit of the surface (body bytes, nesting depth,
    # JSON values, integer digits); metadata the limit and its setting.
    REQUEST_LIMIT = "REQUEST_LIMIT"
    # The request body did not arrive in time (HTTP 408); metadata the seconds allowed.
    REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
    # The thing does not exist, or the caller may not know it does; metadata `kind`
    # (inbox, conversation, call, file, target, function, token, tool, ...) and `id`.
    NOT_FOUND = "NOT_FOUND"
    # The action needs a role the caller lacks; metadata `role` (operator, service).
    ROLE_REQUIRED = "ROLE_REQUIRED"
    # Only the owner (of a target, a call, a timer) may do this; metadata what is owned.
    NOT_OWNER = "NOT_OWNER"
    # The caller's identity is scoped (a capability, a runtime credential, an agent of a
    # crew) and this is outside its scope.
    OUT_OF_SCOPE = "OUT_OF_SCOPE"
    # A retry key came back with a different request (C4, F6, S1); metadata `field`.
    KEY_REUSED = "KEY_REUSED"
    # A retry key is held by the same request still being stored (sent twice at once):
    # retry, and the first one's outcome comes back; metadata `field`.
    KEY_IN_USE = "KEY_IN_USE"
    # The name differs only by case from a registered one (B10): choose another;
    # metadata `field` and the `existing` name.
    NAME_TAKEN = "NAME_TAKEN"
    # A webhook event (its delivery id or signature) was already received: nothing was
    # delivered again; do not resend it. Metadata `delivery_key`, `received_at`.
    REPLAYED = "REPLAYED"
    # A bound on what is stored is reached (a call's files, messages, events or steps, a
    # target's file bytes, a conversation's pending wake-ups or schedules): nothing was
    # stored; metadata `limit`, what is counted (`counted`), and `setting` if any.
    STORED_LIMIT = "STORED_LIMIT"
    # The turn has ended (completed or failed): nothing more can be reported on it.
    TURN_ENDED = "TURN_ENDED"
    # The wake-up has fired or was cancelled: only a pending one can change.
    NOT_PENDING = "NOT_PENDING"
    # The call has no question waiting for a reply (answered, withdrawn, none asked).
    NO_PENDING_QUESTION = "NO_PENDING_QUESTION"
    # The call already has a question waiting for its reply: wait before asking another.
    QUESTION_PENDING = "QUESTION_PENDING"
    # The question of this ask_id was withdrawn: ask again with a new ask_id.
    QUESTION_WITHDRAWN = "QUESTION_WITHDRAWN"
    # The reply is not one of the pending question's choices; metadata `choices` (JSON).
    NOT_A_CHOICE = "NOT_A_CHOICE"
    # The target has agent messaging turned off (free_text_ask = false, C8): call one of
    # its declared functions instead; metadata `target`.
    MESSAGING_DISABLED = "MESSAGING_DISABLED"
    # No credential (token, session, signature) was sent; metadata what was expected.
    CREDENTIALS_MISSING = "CREDENTIALS_MISSING"
    # The credential is unknown, malformed, of the wrong kind, or its signature does not
    # match: get a valid one.
    CREDENTIALS_INVALID = "CREDENTIALS_INVALID"
    # The credential (a token, a console session, a signed timestamp) is past its time:
    # get or make a fresh one.
    CREDENTIALS_EXPIRED = "CREDENTIALS_EXPIRED"
    # The credential was revoked: ask for a new one; retrying with it never succeeds.
    CREDENTIALS_REVOKED = "CREDENTIALS_REVOKED"
    # The replica is at one of its limits as a whole (the gateway's pools, B6): retry
    # after the delay; metadata the setting and limit.
    OVERLOADED = "OVERLOADED"
    # The replica is shutting down: retry, another replica (or this one restarted) answers.
    DRAINING = "DRAINING"
    # The replica lacks configuration the action needs (a signing key); metadata `setting`.
    NOT_CONFIGURED = "NOT_CONFIGURED"
    # Said by a client itself: the gateway or service could not be reached or did not
    # answer in time; metadata `url` or `service`.
    UNREACHABLE = "UNREACHABLE"


class AgentWorksError(Exception):
    """Base of every error a service or client raises on purpose."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    # The reason when the raise site gives none: set where a class has one meaning.
    default_reason: Reason | str = ""

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
        self.reason = reason or self.default_reason
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
    default_reason = Reason.NOT_FOUND


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


def rule_meta(field: str, rule: str = "", limit: object = None) -> dict[str, str]:
    """The metadata of a FIELD_RULE refusal: the field, the rule (named as protovalidate
    names it: `string.max_bytes`, `required`, ...) and the limit when there is one."""
    meta = {"field": field}
    if rule:
        meta["rule"] = rule
    if limit is not None:
        meta["limit"] = str(limit)
    return meta


def kind_meta(kind: str, id: str) -> dict[str, str]:
    """The metadata of a NOT_FOUND refusal: what kind of thing, and its id."""
    return {"kind": kind, "id": id}


def error_object(
    code: str,
    message: str,
    *,
    reason: str = "",
    metadata: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> dict[str, Any]:
    """A refusal as JSON, the one shape every surface gives it (the HTTP API's body, MCP
    results' structured content, the CLI's --json): `code` (the gRPC status name) and
    `message`; with a reason, `reason` and `metadata` (ErrorInfo); with a retry delay,
    `retry_after_seconds`."""
    error: dict[str, Any] = {"code": code, "message": message}
    if reason:
        error["reason"] = str(reason)
        error["metadata"] = dict(metadata or {})
    elif metadata:
        error["metadata"] = dict(metadata)
    if retry_after is not None:
        error["retry_after_seconds"] = retry_after
    return error


def as_object(exc: AgentWorksError) -> dict[str, Any]:
    """`error_object` of a raised error."""
    return error_object(
        exc.code.name,
        exc.message,
        reason=str(exc.reason or ""),
        metadata=exc.metadata,
        retry_after=exc.retry_after,
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
