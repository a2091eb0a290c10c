"""A turn's wake-ups (S1, S2): ask for one, list, cancel and reschedule them, each on the
turn's own conversation only. Mixed into `TurnContext`."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from agentworks.client import SchedulerClient
from agentworks.core import errors
from agentworks.scheduler.v1 import scheduler_pb2 as s

T = TypeVar("T")


class WakeUps:
    """`TurnContext`'s wake-up methods; the scheduler client acts as the runtime's agent."""

    scheduler: SchedulerClient | None
    wake_ups: list[s.WakeUp]
    log: Any

    if TYPE_CHECKING:

        @property
        def turn_id(self) -> str: ...

        @property
        def conversation_id(self) -> str: ...

        async def _retried(self, event: str, make: Callable[[], Awaitable[T]]) -> T: ...

    async def wake_me(
        self,
        *,
        after_seconds: float | None = None,
        at: datetime | None = None,
        note: str = "",
    ) -> s.WakeUp:
        """Ask the scheduler for a durable wake-up of this conversation (S1).

        Give `after_seconds` (rounded up to whole seconds) or `at` (an aware datetime).
        When due, the scheduler delivers a `wake_up` into this conversation's turn queue
        with `note` as its text (S2); a later turn gets it. Messages do not cancel it;
        `self.scheduler.cancel_wake_up(w.wake_up_id)` or `reschedule_wake_up` do.

        Retried on UNAVAILABLE with a per-turn retry key (`turn:<turn_id>:wake:<n>`),
        so a retry after a lost answer gets the same wake-up, never a second (S1).
        Raises `PreconditionFailed` when the runtime has no scheduler address
        (AGENTWORKS_SCHEDULER_ADDRESS), and the scheduler's errors (`InvalidArgument`
        for a bad time or note, `Busy` past 100 pending).
        """
        if self.scheduler is None:
            raise errors.PreconditionFailed(
                "this runtime has no scheduler: set AGENTWORKS_SCHEDULER_ADDRESS "
                "(or --scheduler-address) to request wake-ups"
            )
        if (after_seconds is None) == (at is None):
            raise ValueError("wake_me needs exactly one of after_seconds or at")
        if at is not None and at.tzinfo is None:
            raise ValueError("wake_me(at=...) needs an aware datetime, e.g. datetime.now(UTC)")
        delay = None if after_seconds is None else max(0, math.ceil(after_seconds))
        submission_id = f"turn:{self.turn_id}:wake:{len(self.wake_ups) + 1}"
        scheduler = self.scheduler
        wake_up = await self._retried(
            "wake_up.retry",
            lambda: scheduler.create_wake_up(
                self.conversation_id,
                at=at,
                delay_seconds=delay,
                note=note,
                submission_id=submission_id,
            ),
        )
        self.wake_ups.append(wake_up)
        self.log.info(
            "wake_up.requested",
            wake_up_id=wake_up.wake_up_id,
            due_at=wake_up.due_at.ToJsonString(),
        )
        return wake_up

    def _scheduler_client(self) -> SchedulerClient:
        if self.scheduler is None:
            raise errors.PreconditionFailed(
                "this runtime has no scheduler: set AGENTWORKS_SCHEDULER_ADDRESS "
                "(or --scheduler-address) to use wake-ups"
            )
        return self.scheduler

    async def list_wake_ups(
        self, *, include_finished: bool = False, after: str = "", limit: int = 0
    ) -> s.ListWakeUpsResponse:
        """This conversation's wake-ups, pending ones (and with `include_finished` fired,
        cancelled and failed ones too), paged by `after=next_cursor` (S1)."""
        return await self._scheduler_client().list_wake_ups(
            conversation_id=self.conversation_id,
            include_finished=include_finished,
            after=after,
            limit=limit,
        )

    async def _own_wake_up(self, wake_up_id: str) -> None:
        """NotFound unless the wake-up is this conversation's: a turn acts on its own
        conversation's wake-ups only, whatever else the runtime's agent may see."""
        found = await self._scheduler_client().get_wake_up(wake_up_id)
        if found.conversation_id != self.conversation_id:
            raise errors.NotFound(
                f"wake-up {wake_up_id!r} not found in this conversation: list_wake_ups "
                "shows its wake-ups"
            )

    async def cancel_wake_up(self, wake_up_id: str) -> s.WakeUp:
        """Cancel a pending wake-up of this conversation; only this (or a reschedule)
        stops it (S1)."""
        await self._own_wake_up(wake_up_id)
        wake_up = await self._scheduler_client().cancel_wake_up(wake_up_id)
        self.log.info("wake_up.cancelled", wake_up_id=wake_up_id)
        return wake_up

    async def reschedule_wake_up(
        self,
        wake_up_id: str,
        *,
        after_seconds: float | None = None,
        at: datetime | None = None,
    ) -> s.WakeUp:
        """Move a pending wake-up of this conversation to `at` or `after_seconds` from
        now (exactly one, as for `wake_me`); its note stays (S1)."""
        if (after_seconds is None) == (at is None):
            raise ValueError("reschedule_wake_up needs exactly one of after_seconds or at")
        if at is not None and at.tzinfo is None:
            raise ValueError("reschedule_wake_up(at=...) needs an aware datetime")
        await self._own_wake_up(wake_up_id)
        delay = None if after_seconds is None else max(0, math.ceil(after_seconds))
        scheduler = self._scheduler_client()
        wake_up = await self._retried(
            "wake_up.retry",
            lambda: scheduler.reschedule_wake_up(wake_up_id, at=at, delay_seconds=delay),
        )
        self.log.info(
            "wake_up.rescheduled", wake_up_id=wake_up_id, due_at=wake_up.due_at.ToJsonString()
        )
        return wake_up
