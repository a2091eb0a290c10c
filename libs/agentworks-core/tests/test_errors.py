"""A refusal travels as a status with details (google.rpc ErrorInfo, RetryInfo) and comes
back as the same domain error on the client."""

from __future__ import annotations

import grpc
import pytest

from agentworks.core import errors


def test_a_refusal_comes_back_with_its_reason_retry_delay_and_metadata_B7():
    """B7: what a service raises (code, reason, retry delay, ErrorInfo metadata) is what
    the client rebuilds from the trailers; without details only the code and message."""
    sent = errors.Busy(
        "user:alice holds its share",
        reason=errors.Reason.PRINCIPAL_SHARE,
        retry_after=0.25,
        metadata={"share": "requests", "principal": "user:alice"},
    )
    trailers = ((errors.STATUS_DETAILS_KEY, errors.status_details(sent, sent.message)),)
    got = errors.from_trailers(sent.code, sent.message, trailers)
    assert type(got) is errors.Busy
    assert (got.message, got.reason, got.metadata) == (sent.message, sent.reason, sent.metadata)
    assert got.retry_after == pytest.approx(0.25)
    assert errors.reason_of(trailers) == errors.Reason.PRINCIPAL_SHARE
    assert errors.retry_after_of(trailers) == pytest.approx(0.25)

    plain = errors.from_trailers(grpc.StatusCode.INVALID_ARGUMENT, "bad", ())
    assert type(plain) is errors.InvalidArgument
    assert (plain.reason, plain.retry_after, plain.metadata) == ("", None, {})


def test_metadata_travels_without_a_reason_B8():
    """B8: a refusal that names its field and limit in metadata but has no reason (a size
    or NUL refusal) still sends the metadata, so the gateway can pass it on."""
    sent = errors.InvalidArgument(
        "text is 70000 bytes; the limit is 65536 bytes",
        metadata={"field": "text", "limit": "65536"},
    )
    trailers = ((errors.STATUS_DETAILS_KEY, errors.status_details(sent, sent.message)),)
    got = errors.from_trailers(sent.code, sent.message, trailers)
    assert (got.reason, got.metadata) == ("", {"field": "text", "limit": "65536"})


def test_a_not_found_has_its_reason_wherever_it_is_raised_P6():
    """P6: NotFound has one meaning, so it carries NOT_FOUND even where the raise site
    names none (and from a status without details); a site may add the kind and id."""
    assert errors.NotFound("inbox 'x' not found").reason == errors.Reason.NOT_FOUND
    rebuilt = errors.from_trailers(grpc.StatusCode.NOT_FOUND, "no such inbox", ())
    assert (type(rebuilt), rebuilt.reason) == (errors.NotFound, errors.Reason.NOT_FOUND)
    sent = errors.NotFound("no token 't1'", metadata=errors.kind_meta("token", "t1"))
    trailers = ((errors.STATUS_DETAILS_KEY, errors.status_details(sent, sent.message)),)
    got = errors.from_trailers(sent.code, sent.message, trailers)
    assert (got.reason, got.metadata) == ("NOT_FOUND", {"kind": "token", "id": "t1"})


def test_a_refusal_has_one_json_shape_for_every_surface_G1_P6():
    """G1 P6: the error object of the HTTP API, MCP results and the CLI's --json: code and
    message; reason and metadata with a reason; the retry delay when there is one."""
    busy = errors.Busy(
        "full",
        reason=errors.Reason.OVERLOADED,
        retry_after=1.5,
        metadata={"setting": "GATEWAY_POOL_SIZE", "limit": "8"},
    )
    assert errors.as_object(busy) == {
        "code": "RESOURCE_EXHAUSTED",
        "message": "full",
        "reason": "OVERLOADED",
        "metadata": {"setting": "GATEWAY_POOL_SIZE", "limit": "8"},
        "retry_after_seconds": 1.5,
    }
    field = errors.InvalidArgument(
        "text: too long",
        reason=errors.Reason.FIELD_RULE,
        metadata=errors.rule_meta("text", "string.max_bytes", 65536),
    )
    assert errors.as_object(field)["metadata"] == {
        "field": "text",
        "rule": "string.max_bytes",
        "limit": "65536",
    }
    assert errors.error_object("INTERNAL", "bug") == {"code": "INTERNAL", "message": "bug"}
