"""Metrics (P4): every RPC is counted by method and code and served over HTTP."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from agentworks.core.clients import MessagingClient
from agentworks.core.errors import NotFound
from agentworks.core.metrics import serve_metrics, watch_database


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


async def test_rpcs_are_counted_by_method_and_code_P4(messaging, identity):
    """P4: a refused RPC shows up as a NOT_FOUND count for its method."""
    watch_database("messaging", messaging.database)
    port = serve_metrics("127.0.0.1:0")
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as client:
        with pytest.raises(NotFound):
            await client.read("00000000-0000-0000-0000-000000000000")
    body = await asyncio.to_thread(scrape, port)
    assert (
        'agentworks_rpc_requests_total{code="NOT_FOUND",method="Read",service="messaging"}' in body
    )
    assert 'agentworks_long_poll_waiters{service="messaging"}' in body
    assert 'agentworks_db_pool_checked_out{service="messaging"}' in body
