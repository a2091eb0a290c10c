"""The gateway's request and long-poll pools (B6): past either a request is refused 503
with a retry delay at once, and a long-poll leaves the request pool while it waits."""

from __future__ import annotations

import pytest

from agentworks.core import errors
from agentworks_gateway.admission import CALLER, Admission


def test_past_the_request_pool_a_request_is_refused_503_with_a_retry_delay_B6():
    admission = Admission(max_requests=2, max_waits=1)
    with admission.request("user:a"), admission.request("user:b"):
        with pytest.raises(errors.Unavailable) as refused, admission.request("user:c"):
            pass
        assert refused.value.retry_after == 1.0
        assert refused.value.metadata == {"pool": "requests", "setting": "GATEWAY_MAX_REQUESTS"}
        assert refused.value.reason == "OVERLOADED"
        assert "(GATEWAY_MAX_REQUESTS)" in refused.value.message
    assert admission.requests == 0
    with admission.request("user:c"):  # room again once they ended
        assert admission.requests == 1


def test_a_long_poll_waits_in_its_own_pool_not_the_request_pool_B6():
    """B6: a waiting long-poll leaves room in the request pool for other work, holds one
    of the wait pool, and is counted a request again when its wait ends."""
    admission = Admission(max_requests=1, max_waits=1)
    token = CALLER.set("user:a")
    try:
        with admission.request("user:a"):
            with admission.wait():
                assert (admission.requests, admission.waits) == (0, 1)
                with (
                    admission.request("user:b"),  # the waiting one left room
                    pytest.raises(errors.Unavailable) as refused,
                    admission.wait(),
                ):
                    pass
            assert (admission.requests, admission.waits) == (1, 0)
    finally:
        CALLER.reset(token)
    assert refused.value.metadata == {"pool": "waits", "setting": "GATEWAY_MAX_WAITS"}
    assert "(GATEWAY_MAX_WAITS)" in refused.value.message
    assert (admission.requests, admission.waits) == (0, 0)
