"""Scheduler use cases, one module per kind: wake-ups, schedules, pauses, webhooks, with
the access rules (access.py) and the limits and checks (rules.py). No gRPC, no SQL.

`SchedulerService` is all of them, plus the firing worker (firing.py) it starts ticks
of and reports on (`stats`, `wait_ticks`, `after_delivery`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from agentworks_scheduler.config import Config
from agentworks_scheduler.firing import Firing
from agentworks_scheduler.models import Conversations, Due, Participation
from agentworks_scheduler.service.pauses import Pauses
from agentworks_scheduler.service.schedules import Schedules
from agentworks_scheduler.service.wake_ups import WakeUps
from agentworks_scheduler.service.webhooks import Webhooks
from agentworks_scheduler.store import SchedulerStore

__all__ = ["Conversations", "Participation", "SchedulerService"]


class SchedulerService(WakeUps, Schedules, Pauses, Webhooks):
    """The timer, schedule, pause and webhook contract (S1-S6) over a store and messaging."""

    def __init__(self, store: SchedulerStore, conversations: Conversations, config: Config) -> None:
        super().__init__(store, conversations, config)
        self.draining = asyncio.Event()
        self.firing = Firing(store, conversations, config, self.draining)

    async def tick(self) -> int:
        """Fire everything due and not paused (firing.py)."""
        return await self.firing.tick()

    async def wait_ticks(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once `count` more ticks have ended (two: one started after this call)."""
        await self.firing.wait_ticks(count, timeout)

    @property
    def ticks(self) -> int:
        return self.firing.ticks

    @property
    def stats(self) -> Counter[str]:
        """Occurrences delivered, duplicates, failed and retries, since start."""
        return self.firing.stats

    @property
    def after_delivery(self) -> Callable[[Due], Awaitable[None]] | None:
        """Fault injection for tests (see `Firing.after_delivery`)."""
        return self.firing.after_delivery

    @after_delivery.setter
    def after_delivery(self, hook: Callable[[Due], Awaitable[None]] | None) -> None:
        self.firing.after_delivery = hook
