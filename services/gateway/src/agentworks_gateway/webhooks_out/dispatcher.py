"""Sending due deliveries (N2): claim, attempt, record; retried with exponential backoff
until the delivery's `give_up_at`.

A claim is one statement (`deliveries_claim`, FOR UPDATE SKIP LOCKED) that counts the
attempt and moves the delivery's next attempt past its lease: no two replicas send one
delivery at once, and one killed mid-send (kill -9) leaves it to be retried by any
replica once the lease has passed. The outcome is recorded only by the claim that made
the attempt (its replica and attempt number), so a late answer never overwrites a newer
attempt's.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from datetime import UTC, datetime

import structlog

from agentworks.core import errors
from agentworks_gateway.webhooks_out.models import Attempt
from agentworks_gateway.webhooks_out.sending import Sender
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig
from agentworks_gateway.webhooks_out.store import WebhookStore

log = structlog.get_logger("agentworks.gateway.webhooks_out")

# A claim's lease past the attempt's own timeout: time to record the outcome.
LEASE_MARGIN_SECONDS = 5.0


class Dispatcher:
    """One replica's sender of due deliveries, up to `concurrency` attempts at once."""

    def __init__(
        self, store: WebhookStore, sender: Sender, config: WebhooksOutConfig, replica: str
    ) -> None:
        self.store = store
        self.sender = sender
        self.config = config
        self.replica = replica
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    def wake(self) -> None:
        """Something may be due now (a new delivery, a redeliver, a finished attempt)."""
        self._wake.set()

    async def run(self) -> None:
        """Claim and send until cancelled."""
        lease = self.config.timeout_seconds + LEASE_MARGIN_SECONDS
        try:
            while True:
                self._wake.clear()
                free = self.config.concurrency - len(self._running)
                delay = self.config.poll_seconds
                try:
                    claimed = (
                        await self.store.claim(self.replica, lease_seconds=lease, limit=free)
                        if free
                        else []
                    )
                    for attempt in claimed:
                        task = asyncio.create_task(self._attempt(attempt))
                        self._running.add(task)
                        task.add_done_callback(self._finished)
                    if free and len(claimed) == free:
                        continue  # more may be due
                    due = await self.store.next_due()
                    if due is not None:
                        wait = (due - datetime.now(UTC)).total_seconds()
                        delay = min(delay, max(wait, 0.01))
                except errors.Unavailable as exc:
                    log.warning("webhooks.dispatch_failed", error=exc.message)
                except Exception:  # never stop sending for one bad round
                    log.exception("webhooks.dispatch_failed")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
        finally:
            for task in self._running:
                task.cancel()
            if self._running:
                await asyncio.wait(self._running)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._wake.set()

    async def _attempt(self, attempt: Attempt) -> None:
        try:
            outcome = await self.sender.send(
                attempt.url, attempt.secret, attempt.delivery_id, attempt.payload, attempt.headers
            )
            if outcome.delivered:
                await self.store.delivered(attempt, self.replica, outcome.http_status)
                log.info(
                    "webhook_out.delivered",
                    delivery_id=attempt.delivery_id,
                    endpoint_id=attempt.endpoint_id,
                    attempts=attempt.attempts,
                    http_status=outcome.http_status,
                )
                return
            # Jitter, so that many deliveries that failed together do not retry together.
            retry = self.config.retry_delay(attempt.attempts) * random.uniform(0.9, 1.1)
            await self.store.failed(
                attempt,
                self.replica,
                http_status=outcome.http_status,
                error=outcome.error,
                retry_seconds=retry,
            )
            log.info(
                "webhook_out.failed",
                delivery_id=attempt.delivery_id,
                endpoint_id=attempt.endpoint_id,
                attempts=attempt.attempts,
                http_status=outcome.http_status,
                error=outcome.error,
                retry_in=round(retry, 2),
            )
        except errors.Unavailable as exc:
            # The lease passes and the delivery is attempted again: at least once.
            log.warning(
                "webhook_out.unrecorded", delivery_id=attempt.delivery_id, error=exc.message
            )
