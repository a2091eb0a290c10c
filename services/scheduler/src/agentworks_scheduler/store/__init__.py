"""The scheduler's SQL, one module per use case; `SchedulerStore` is all of it.

Each method is one short transaction (or one statement). Firing claims in one short
transaction and records in another, with no transaction open while messaging is
called (store/firing.py).
"""

from __future__ import annotations

from agentworks_scheduler.store.common import When
from agentworks_scheduler.store.firing import Claim, FiringStore
from agentworks_scheduler.store.pauses import PauseStore
from agentworks_scheduler.store.schedules import ScheduleStore
from agentworks_scheduler.store.timers import TimerStore
from agentworks_scheduler.store.wake_ups import WakeUpStore
from agentworks_scheduler.store.webhooks import WebhookStore

__all__ = ["Claim", "SchedulerStore", "When"]


class SchedulerStore(WakeUpStore, ScheduleStore, PauseStore, WebhookStore, FiringStore, TimerStore):
    """All SQL of the scheduler service."""
