"""Metrics (P4): every RPC is counted by method and code and served over HTTP."""

from __future__ import annotations

import asyncio
import re

import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import NotFound
from agentworks.server.metrics import serve_metrics, watch_database
from agentworks.server.testing import scrape


async def test_rpcs_are_counted_by_method_and_code_P4(messaging, identity):
    """P4: a refused RPC shows up as a NotFound count for its method under the grpc
    Prometheus names (`grpc_server_handled_total`, started, handling seconds); counters
    are named `*_total` (NOTIFY wake-ups was a gauge), and `agentworks_build_info` names
    the service, version, Python and instance of the process."""
    watch_database("messaging", messaging.database)
    port = serve_metrics("127.0.0.1:0")
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as client:
        with pytest.raises(NotFound):
            await client.read("00000000-0000-0000-0000-000000000000")
    body = (await asyncio.to_thread(scrape, port)).text
    labels = 'grpc_method="Read",grpc_service="agentworks.messaging.v1.MessagingService"'
    assert f'grpc_server_handled_total{{grpc_code="NotFound",{labels},grpc_type="unary"}}' in body
    assert f'grpc_server_started_total{{{labels},grpc_type="unary"}}' in body
    assert f'grpc_server_handling_seconds_count{{{labels},grpc_type="unary"}}' in body
    assert "agentworks_rpc_" not in body
    assert 'agentworks_long_poll_waiters{service="messaging"}' in body
    assert 'agentworks_db_pool_checked_out{service="messaging"}' in body
    # Counters end in _total and say so; a build_info says what each process runs.
    assert "# TYPE agentworks_notify_wakeups_total counter" in body
    assert 'agentworks_notify_wakeups_total{service="messaging"}' in body
    assert re.search(
        r'agentworks_build_info\{python="3\.[0-9.]+",service="messaging",'
        r'service_instance_id="[^"]+",version="[^"]+"\} 1\.0',
        body,
    ), body


def test_gauge_refresh_is_configured_per_service_and_off_without_metrics_P4():
    """P4 P6: `<SERVICE>_METRICS_REFRESH_SECONDS` (default 5 s, 0.1 s to an hour) sets how
    often the database-wide gauges are recomputed, a value out of range is refused; with
    no metrics address nothing runs."""
    from agentworks.core.settings import ConfigError, Env
    from agentworks.server.config import ServiceConfig
    from agentworks.server.metrics import refresher

    def config(**env: str) -> ServiceConfig:
        return ServiceConfig.from_env("messaging", 50051, Env("MESSAGING", env))

    assert config().metrics_refresh_seconds == 5.0
    assert config(MESSAGING_METRICS_REFRESH_SECONDS="0.5").metrics_refresh_seconds == 0.5
    assert config(MESSAGING_METRICS_REFRESH_SECONDS="0.1").metrics_refresh_seconds == 0.1
    with pytest.raises(ConfigError, match="MESSAGING_METRICS_REFRESH_SECONDS must be between"):
        config(MESSAGING_METRICS_REFRESH_SECONDS="0")

    async def never() -> None:
        raise AssertionError("no refresh without metrics")

    assert refresher(config(), never) == []


def test_published_label_sets_replace_the_previous_ones_P4():
    """P4: a labelled gauge published again keeps only the label sets given this time."""
    from prometheus_client import CollectorRegistry, Gauge

    from agentworks.server.metrics import publish

    registry = CollectorRegistry()
    gauge = Gauge("test_published", "A test gauge.", ["target"], registry=registry)
    publish(gauge, {("crew:a",): 1, ("crew:b",): 2})
    publish(gauge, {("crew:b",): 3})
    assert registry.get_sample_value("test_published", {"target": "crew:a"}) is None
    assert registry.get_sample_value("test_published", {"target": "crew:b"}) == 3
