"""The completion-notice outbox (F13): claiming due notices and recording outcomes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import sqlalchemy as sa

from agentworks_functions import tables as t
from agentworks_functions.models import (
    Notice,
)
from agentworks_functions.store.base import FunctionsStoreBase
from agentworks_functions.store.sql import _NOTICES_ATTEMPTED


class NoticeQueries(FunctionsStoreBase):
    async def deliver_notices(
        self,
        send: Callable[[list[Notice]], Awaitable[list[str | None]]],
        *,
        retry_after: timedelta,
        batch: int = 100,
    ) -> int:
        """Send due completion notices, a batch at a time; `send` says per notice None
        (delivered) or why it failed.

        The notices stay locked while they are sent, so replicas never send one twice at
        once; after a crash they are sent again and messaging's idempotency key drops the
        repeats.
        """
        n = t.notices
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(n)
                    .where(
                        n.c.delivered_at.is_(None),
                        n.c.failed_at.is_(None),
                        n.c.next_attempt_at <= sa.func.now(),
                    )
                    .order_by(n.c.next_attempt_at)
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if not rows:
                return 0
            notices = [
                Notice(str(r.call_id), str(r.conversation_id), r.text, r.attributes, r.attempts)
                for r in rows
            ]
            outcomes = await send(notices)
            # Every outcome in one statement: delivered, failed for good, or due again
            # after a backoff that doubles per attempt (capped at 60 x retry_after).
            await conn.execute(
                _NOTICES_ATTEMPTED,
                {
                    "ids": [row.call_id for row in rows],
                    "errors": outcomes,
                    "delays": [
                        (retry_after * min(2**row.attempts, 60)).total_seconds() for row in rows
                    ],
                },
            )
        return len(rows)
