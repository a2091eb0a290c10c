"""The tick (S2, S3, S6): claim due wake-ups and schedule occurrences, deliver, record.

Each batch is claimed in a short transaction, delivered to messaging with no
transaction open, under each occurrence's idempotency key, and then recorded in a
second short transaction (store/firing.py says why that is exactly once).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, timedelta
from typing import Any, Protocol

import structlog

from agentworks.core.errors import REFUSED_FOR_GOOD, AgentWorksError, Reason
from agentworks_scheduler import metrics
from agentworks_scheduler import recurrence as rec
from agentworks_scheduler.config import Config
from agentworks_scheduler.models import (
    Conversations,
    Delivered,
    Due,
    Failed,
    FireOutcome,
    Retry,
    Schedule,
    WakeUp,
)
from agentworks_scheduler.store import Claim, SchedulerStore

log = structlog.get_logger("agentworks.scheduler")

# A firing more than one tick plus this much after its due time is marked late.
LATE_SLACK = timedelta(seconds=1)
PURGE_EVERY_SECONDS = 600.0
# One EnqueueDeliveries request carries at most this many deliveries (messaging's limit)
# and about this many bytes of text (well under gRPC's 8 MiB message limit).
MAX_ENQUEUE_ITEMS = 500
MAX_ENQUEUE_BYTES = 2 * 1024 * 1024


class Firing:
    """Fires what is due, batch after batch; counts what happened (`stats`, `ticks`)."""

    def __init__(
        self,
        store: SchedulerStore,
        conversations: Conversations,
        config: Config,
        draining: asyncio.Event,
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.config = config
        self.draining = draining
        self.stats: Counter[str] = Counter()
        self.ticks = 0
        self._ticked = asyncio.Condition()
        self._last_purge = 0.0
        self._late_after = timedelta(seconds=config.tick_seconds) + LATE_SLACK
        # Fault injection for tests: awaited after messaging accepted an occurrence and
        # before the scheduler records it (a crash here must not duplicate it, S6).
        self.after_delivery: Callable[[Due], Awaitable[None]] | None = None

    async def tick(self) -> int:
        """Fire everything due and not paused, batch after batch (S2, S3, S6)."""
        fired = 0
        try:
            for fire_batch in (self._fire_wake_ups, self._fire_schedules):
                while not self.draining.is_set():
                    claimed, delivered = await fire_batch()
                    fired += delivered
                    if claimed < self.config.batch_size or delivered == 0:
                        break
            await self._purge()
        finally:
            async with self._ticked:
                self.ticks += 1
                self._ticked.notify_all()
        return fired

    async def wait_ticks(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once `count` more ticks have ended (two: one started after this call)."""
        target = self.ticks + count
        async with asyncio.timeout(timeout), self._ticked:
            await self._ticked.wait_for(lambda: self.ticks >= target)

    async def _deliver_all(
        self, dues: list[Due], request_of: Callable[[Due], dict[str, Any]]
    ) -> list[FireOutcome]:
        """Deliver a batch of occurrences in as few EnqueueDeliveries requests as fit."""
        requests = [request_of(due) for due in dues]
        outcomes: list[FireOutcome] = []
        for chunk in _chunks(requests):
            try:
                results = await self.conversations.enqueue_many(chunk)
            except AgentWorksError as exc:  # the whole request failed: all stay pending
                self.stats["retries"] += len(chunk)
                log.warning("occurrences.retry", count=len(chunk), error=exc.message)
                outcomes += [Retry(exc.message)] * len(chunk)
                continue
            outcomes += [
                self._outcome(request["idempotency_key"], result)
                for request, result in zip(chunk, results, strict=True)
            ]
        if self.after_delivery is not None:
            for due, outcome in zip(dues, outcomes, strict=True):
                if isinstance(outcome, Delivered):
                    await self.after_delivery(due)
        return outcomes

    def _outcome(self, key: str, result: tuple[str, bool] | AgentWorksError) -> FireOutcome:
        """One occurrence's answer from messaging, as delivered, failed or retry."""
        if isinstance(result, AgentWorksError) and result.reason == Reason.KEY_REUSED:
            # Messaging already holds a delivery under this occurrence's key, which only
            # the scheduler mints (the wake-up's or schedule's id and the occurrence): an
            # earlier attempt was stored and its answer lost, and the content changed
            # since (a schedule's prompt was edited). The occurrence is in the turn queue
            # once, with the first attempt's text: delivered (S6). Messaging's refusal
            # carries no delivery id, so none is recorded.
            self.stats["duplicates"] += 1
            log.warning("occurrence.delivered_earlier", key=key, reason=result.reason)
            return Delivered(None, created=False)
        if isinstance(result, REFUSED_FOR_GOOD):
            self.stats["failed"] += 1
            log.warning("occurrence.refused", key=key, reason=result.reason, error=result.message)
            return Failed(result.message)
        if isinstance(result, AgentWorksError):
            self.stats["retries"] += 1
            log.warning("occurrence.retry", key=key, reason=result.reason, error=result.message)
            return Retry(result.message)
        delivery_id, created = result
        self.stats["delivered" if created else "duplicates"] += 1
        return Delivered(delivery_id, created)

    def _lateness(self, due: Due) -> dict[str, Any]:
        late = due.late
        return {"late": late > self._late_after, "late_seconds": round(late.total_seconds(), 3)}

    def _wake_up_request(self, due: Due) -> dict[str, Any]:
        wake_up: WakeUp = due.item
        due_at = wake_up.due_at.astimezone(UTC).isoformat(timespec="microseconds")
        return {
            "conversation_id": wake_up.conversation_id,
            "kind": "wake_up",
            "idempotency_key": f"wake_up:{wake_up.id}:{due_at}",
            "text": wake_up.note,
            "attributes": {
                "wake_up_id": wake_up.id,
                "due_at": due_at,
                "requested_by": wake_up.created_by,
                **self._lateness(due),
            },
        }

    def _schedule_request(self, due: Due) -> dict[str, Any]:
        schedule: Schedule = due.item
        occurrence = schedule.next_fire_at.astimezone(UTC).isoformat(timespec="microseconds")
        return {
            "conversation_id": schedule.conversation_id,
            "kind": "schedule",
            "idempotency_key": f"schedule:{schedule.id}:{occurrence}",
            "text": schedule.prompt,
            "attributes": {
                "schedule_id": schedule.id,
                "schedule_name": schedule.name,
                "occurrence": occurrence,
                "missed_occurrences": rec.missed(
                    schedule.recurrence, schedule.anchor_at, schedule.next_fire_at, due.now
                ),
                **self._lateness(due),
            },
        }

    async def _fire_wake_ups(self) -> tuple[int, int]:
        async with self.store.claiming() as claim:
            dues = await claim.due_wake_ups(self.config.batch_size)
            if not dues:
                return 0, 0
            results = await self._deliver(claim, dues, self._wake_up_request)
            await claim.record_wake_ups(results)
        return self._report("wake_up", results)

    async def _fire_schedules(self) -> tuple[int, int]:
        async with self.store.claiming() as claim:
            dues = await claim.due_schedules(self.config.batch_size)
            if not dues:
                return 0, 0
            results = await self._deliver(claim, dues, self._schedule_request)
            # Whatever was missed up to now collapses into this occurrence (S3).
            next_fire = {
                d.item.id: rec.next_after(d.item.recurrence, d.item.anchor_at, d.now) for d in dues
            }
            await claim.record_schedules(results, next_fire)
        return self._report("schedule", results)

    async def _deliver(
        self, claim: Claim, dues: list[Due], request_of: Callable[[Due], dict[str, Any]]
    ) -> list[tuple[Due, FireOutcome]]:
        """Deliver the claimed batch; no transaction is open on `claim` meanwhile."""
        assert not claim.conn.in_transaction()
        return list(zip(dues, await self._deliver_all(dues, request_of), strict=True))

    def _report(self, kind: str, results: list[tuple[Due, FireOutcome]]) -> tuple[int, int]:
        delivered = 0
        for due, outcome in results:
            if isinstance(outcome, Delivered):
                delivered += 1
                metrics.fired(kind, due.late.total_seconds())
                log.info(
                    f"{kind}.fired",
                    id=due.item.id,
                    conversation_id=due.item.conversation_id,
                    delivery_id=outcome.delivery_id,
                    created=outcome.created,
                    late_seconds=round(due.late.total_seconds(), 3),
                )
        return len(results), delivered

    async def _purge(self) -> None:
        now = time.monotonic()
        if now - self._last_purge < PURGE_EVERY_SECONDS:
            return
        self._last_purge = now
        await self.store.purge_finished_wake_ups(timedelta(days=self.config.history_days))
        await self.store.purge_webhook_receipts(
            timedelta(hours=self.config.webhook_replay_window_hours)
        )


def _chunks(requests: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for request in requests:
        weight = len(request["text"].encode()) + 1024  # the rest of an item is small
        if chunk and (len(chunk) == MAX_ENQUEUE_ITEMS or size + weight > MAX_ENQUEUE_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(request)
        size += weight
    if chunk:
        yield chunk


class Ticker(Protocol):
    draining: asyncio.Event

    async def tick(self) -> int: ...


async def tick_loop(ticker: Ticker, tick_seconds: float) -> None:
    """Fire what is due every tick until the service drains (S2).

    `ticker.tick` is looked up each time, so a wrapper installed later (bench/) counts.
    """
    while not ticker.draining.is_set():
        try:
            fired = await ticker.tick()
            if fired:
                log.info("tick.fired", count=fired)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database or messaging may be away; next tick
            log.warning("tick.failed", error=str(exc))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(tick_seconds):
                await ticker.draining.wait()
