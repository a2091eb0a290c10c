"""Webhooks out in one gateway process: the use cases, the feeds it follows and the
dispatcher that sends; started and stopped with the gateway (`app.start`)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import structlog

from agentworks.core.identity import Identity
from agentworks.server.db import Database
from agentworks_gateway.webhooks_out.dispatcher import Dispatcher
from agentworks_gateway.webhooks_out.endpoints import Endpoints
from agentworks_gateway.webhooks_out.feeds import Feeds
from agentworks_gateway.webhooks_out.policy import AddressPolicy
from agentworks_gateway.webhooks_out.retention import keep_within
from agentworks_gateway.webhooks_out.sending import Sender
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig
from agentworks_gateway.webhooks_out.store import WebhookStore

log = structlog.get_logger("agentworks.gateway.webhooks_out")


class WebhooksOut:
    """This replica's webhooks out: `endpoints` for the tool, feeds and dispatcher."""

    def __init__(self, gateway: Any, database: Database, config: WebhooksOutConfig) -> None:
        self.replica = f"gateway-{uuid.uuid4().hex[:12]}"
        self.store = WebhookStore(database)
        self.sender = Sender(
            AddressPolicy(config.allow),
            timeout_seconds=config.timeout_seconds,
            max_response_bytes=config.max_response_bytes,
        )
        self.dispatcher = Dispatcher(self.store, self.sender, config, self.replica)
        self.feeds = Feeds(self.store, gateway, config, self.replica, self.dispatcher.wake)

        async def check_inbox(caller: Identity, inbox_id: str) -> None:
            await gateway.messaging(caller).read(inbox_id, limit=1)

        self.endpoints = Endpoints(self.store, config, check_inbox, self._woken)
        self.config = config
        self._tasks: list[asyncio.Task[None]] = []

    def _woken(self) -> None:
        self.dispatcher.wake()
        self.feeds.wake()

    def start(self) -> None:
        """Start following feeds and sending, in this event loop."""
        self._tasks = [
            asyncio.create_task(self.feeds.run(), name="webhooks-out-feeds"),
            asyncio.create_task(self.dispatcher.run(), name="webhooks-out-dispatcher"),
            asyncio.create_task(
                keep_within(self.store, self.config), name="webhooks-out-retention"
            ),
        ]
        log.info("webhooks_out.started", replica=self.replica)

    async def stop(self) -> None:
        """Stop; give the feeds up so another replica follows them at once."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self.feeds.release_all()
        await self.sender.close()
