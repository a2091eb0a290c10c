"""SQL for the scheduler use cases: one method per use case, each one short transaction.

Firing (S6) is the one longer transaction: a replica claims a batch of due rows with
`FOR UPDATE SKIP LOCKED`, hands them to the service to deliver, records what was
delivered, and commits. Other replicas skip the locked rows, so no occurrence is fired
twice; if the replica dies before it commits, the rows unlock still due and the next
tick delivers them again with the same idempotency key, which messaging deduplicates.
The transaction also holds the pause gate `FOR SHARE`, so Pause waits for it (S3).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.client.errors import Busy, Conflict, NotFound, PreconditionFailed
from agentworks.server.db import Database
from agentworks_scheduler import tables as t
from agentworks_scheduler.models import (
    Delivered,
    Due,
    Failed,
    FireOutcome,
    Page,
    PauseEntry,
    Recurrence,
    Schedule,
    WakeUp,
    Webhook,
)

# A wake-up's time: an absolute instant, or a delay from the database clock.
When = datetime | timedelta


def _wake_up(row: Any) -> WakeUp:
    return WakeUp(
        id=str(row.id),
        seq=row.seq,
        conversation_id=str(row.conversation_id),
        product=row.product,
        note=row.note,
        due_at=row.due_at,
        status=row.status,
        created_by=row.created_by,
        created_at=row.created_at,
        fired_at=row.fired_at,
        delivery_id=str(row.delivery_id) if row.delivery_id else None,
        late_seconds=row.late_seconds,
        error=row.error,
    )


def _schedule(row: Any) -> Schedule:
    return Schedule(
        id=str(row.id),
        seq=row.seq,
        name=row.name,
        conversation_id=str(row.conversation_id),
        product=row.product,
        prompt=row.prompt,
        recurrence=Recurrence(
            cron=row.cron, interval_seconds=row.interval_seconds, time_zone=row.time_zone
        ),
        anchor_at=row.anchor_at,
        paused=row.paused,
        next_fire_at=row.next_fire_at,
        last_fired_at=row.last_fired_at,
        fire_count=row.fire_count,
        created_by=row.created_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_error=row.last_error,
    )


def _webhook(row: Any, secret: str = "") -> Webhook:
    return Webhook(
        id=str(row.id),
        seq=row.seq,
        name=row.name,
        conversation_id=str(row.conversation_id),
        product=row.product,
        salt=row.salt,
        secret_fingerprint=row.secret_fingerprint,
        created_by=row.created_by,
        created_at=row.created_at,
        secret_rotated_at=row.secret_rotated_at,
        secret=secret,
    )


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"{what} {value!r} not found") from None


def _due_value(when: When) -> Any:
    return sa.func.now() + when if isinstance(when, timedelta) else when


def _not_paused(product: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    """No pause covers this product: not global, not the product, not its whole kind."""
    p = t.pauses
    return ~sa.exists().where(
        sa.or_(
            p.c.product == "",
            p.c.product == product,
            p.c.product == sa.func.split_part(product, ":", 1) + ":*",
        )
    )


def _retry_key_conflict(submission_id: str, what: str = "wake-up") -> Conflict:
    return Conflict(
        f"submission_id {submission_id!r} was already used for a different {what}; "
        "use a new submission_id for a new request"
    )


async def _retried(
    conn: Any,
    table: sa.Table,
    *,
    created_by: str,
    submission_id: str,
    request_hash: str,
    what: str,
) -> Any | None:
    """The row this creator's retry key made already (None: none, or no key); the key
    with a different request is refused."""
    if not submission_id:
        return None
    earlier = (
        await conn.execute(
            sa.select(table).where(
                table.c.created_by == created_by, table.c.submission_id == submission_id
            )
        )
    ).one_or_none()
    if earlier is not None and earlier.request_hash != request_hash:
        raise _retry_key_conflict(submission_id, what)
    return earlier


def _retry_key_values(submission_id: str, request_hash: str) -> dict[str, Any]:
    return {
        "submission_id": submission_id or None,
        "request_hash": request_hash if submission_id else None,
    }


def _listing(
    table: sa.Table,
    *,
    conversation_id: str,
    product: str,
    after: int,
    created_by: str | None = None,
) -> sa.Select:
    """Rows of `table` past the cursor `after` in creation order, of one conversation,
    one product and one creator when they are given (empty or None: any)."""
    query = sa.select(table).where(table.c.seq > after).order_by(table.c.seq)
    if conversation_id:
        query = query.where(table.c.conversation_id == _uuid(conversation_id, "conversation"))
    if product:
        query = query.where(table.c.product == product)
    if created_by is not None:
        query = query.where(table.c.created_by == created_by)
    return query


async def _take_turns(conn: Any, what: str, conversation_id: str) -> None:
    """Creates of one kind for one conversation take turns (a transaction-scoped lock),
    so a limit is exact under concurrency and across replicas, and a retry finds its twin."""
    conv = _uuid(conversation_id, "conversation")
    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(f"{what}:{conv}"))))


async def _within_limit(
    conn: Any, table: sa.Table, conversation_id: str, limit: int, what: str, instead: str
) -> None:
    """Busy when the conversation has `limit` rows of `table` already (call it after
    `_take_turns`)."""
    conv = _uuid(conversation_id, "conversation")
    count = (
        await conn.execute(
            sa.select(sa.func.count()).select_from(table).where(table.c.conversation_id == conv)
        )
    ).scalar_one()
    if count >= limit:
        raise Busy(
            f"conversation {conversation_id} already has {count} {what} (the limit is "
            f"{limit}); {instead} first"
        )


class SchedulerStore:
    """All SQL of the scheduler service."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def _page(
        self, query: sa.Select, convert: Callable[[Any], Any], limit: int, after: int
    ) -> Page:
        """The first `limit` rows of `query` as one page; its cursor is the last row's seq."""
        async with self.db.transaction() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        items = [convert(r) for r in rows]
        return Page(items, items[-1].seq if items else after)

    # ----------------------------------------------------------------- wake-ups

    async def create_wake_up(
        self,
        *,
        conversation_id: str,
        product: str,
        note: str,
        when: When,
        created_by: str,
        max_pending: int,
        submission_id: str = "",
        request_hash: str = "",
    ) -> tuple[WakeUp, bool]:
        """A pending wake-up, or the one this retry key created already (S1); and
        whether it is new."""
        w = t.wake_ups
        conv = _uuid(conversation_id, "conversation")
        try:
            async with self.db.transaction() as conn:
                await _take_turns(conn, "wake_ups", conversation_id)
                earlier = await _retried(
                    conn,
                    w,
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what="wake-up",
                )
                if earlier is not None:
                    return _wake_up(earlier), False
                pending = (
                    await conn.execute(
                        sa.select(sa.func.count())
                        .select_from(w)
                        .where(w.c.conversation_id == conv, w.c.status == "pending")
                    )
                ).scalar_one()
                if pending >= max_pending:
                    raise Busy(
                        f"conversation {conversation_id} already has {pending} pending "
                        f"wake-ups (the limit is {max_pending}); cancel or reschedule one "
                        "instead"
                    )
                row = (
                    await conn.execute(
                        w.insert()
                        .values(
                            id=uuid.uuid4(),
                            conversation_id=conv,
                            product=product,
                            note=note,
                            due_at=_due_value(when),
                            created_by=created_by,
                            **_retry_key_values(submission_id, request_hash),
                        )
                        .returning(*w.c)
                    )
                ).one()
        except sa_exc.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise _retry_key_conflict(submission_id) from exc
        return _wake_up(row), True

    async def get_wake_up(self, wake_up_id: str) -> WakeUp:
        w = t.wake_ups
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(w).where(w.c.id == _uuid(wake_up_id, "wake-up")))
            ).one_or_none()
        if row is None:
            raise NotFound(f"wake-up {wake_up_id!r} not found")
        return _wake_up(row)

    async def change_pending_wake_up(self, wake_up_id: str, *, when: When | None) -> WakeUp:
        """Reschedule (`when`) or cancel (None) a wake-up that has not fired yet (S1).

        A wake-up being fired right now is locked: this waits for the firing to commit
        and then refuses, because it has fired.
        """
        w = t.wake_ups
        values: dict[str, Any] = {"updated_at": sa.func.now()}
        if when is None:
            values["status"] = "cancelled"
        else:
            values["due_at"] = _due_value(when)
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    w.update()
                    .where(w.c.id == _uuid(wake_up_id, "wake-up"), w.c.status == "pending")
                    .values(**values)
                    .returning(*w.c)
                )
            ).one_or_none()
            if row is None:
                current = (
                    await conn.execute(sa.select(w).where(w.c.id == _uuid(wake_up_id, "wake-up")))
                ).one_or_none()
                if current is None:
                    raise NotFound(f"wake-up {wake_up_id!r} not found")
                if when is None:
                    raise PreconditionFailed(
                        f"wake-up {wake_up_id} is {current.status}, not pending: only a "
                        "pending wake-up can be cancelled; nothing to do, it is no longer due "
                        "to fire"
                    )
                raise PreconditionFailed(
                    f"wake-up {wake_up_id} is {current.status}, not pending: only a pending "
                    "wake-up can be rescheduled; to be woken again, create a new wake-up for "
                    f"conversation {current.conversation_id}"
                )
        return _wake_up(row)

    async def list_wake_ups(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: tuple[str, str | None] | None,
        include_finished: bool,
        after: int,
        limit: int,
    ) -> Page:
        """Wake-ups in creation order; `visible_to` = (principal, product) limits them."""
        w = t.wake_ups
        query = _listing(w, conversation_id=conversation_id, product=product, after=after)
        if not include_finished:
            query = query.where(w.c.status == "pending")
        if visible_to is not None:
            principal, own_product = visible_to
            visible = w.c.created_by == principal
            if own_product:
                visible = sa.or_(visible, w.c.product == own_product)
            query = query.where(visible)
        return await self._page(query, _wake_up, limit, after)

    async def fire_due_wake_ups(
        self, limit: int, deliver: Callable[[list[Due]], Awaitable[list[FireOutcome]]]
    ) -> list[tuple[Due, FireOutcome]]:
        """Claim up to `limit` due, unpaused wake-ups, deliver them, record the outcome."""
        w = t.wake_ups

        def claimable(now: datetime) -> list[sa.ColumnElement[bool]]:
            return [w.c.status == "pending", w.c.due_at <= now, _not_paused(w.c.product)]

        async def record(conn: AsyncConnection, fired: list[tuple[Due, FireOutcome]]) -> None:
            delivered = [(due, out) for due, out in fired if isinstance(out, Delivered)]
            failed = [
                {"b_id": due.item.id, "b_error": out.error}
                for due, out in fired
                if isinstance(out, Failed)
            ]  # a Retry stays pending: the next tick tries again
            if delivered:
                await conn.execute(
                    _WAKE_UPS_FIRED,
                    {
                        "ids": [due.item.id for due, _ in delivered],
                        "deliveries": [out.delivery_id for _, out in delivered],
                        "lates": [due.late.total_seconds() for due, _ in delivered],
                    },
                )
            if failed:
                await conn.execute(_WAKE_UP_FAILED, failed)

        async def deliver_all(dues: list[Due]) -> list[tuple[Due, FireOutcome]]:
            return list(zip(dues, await deliver(dues), strict=True))

        return await self._fire(w, claimable, w.c.due_at, _wake_up, limit, deliver_all, record)

    async def purge_finished_wake_ups(self, older_than: timedelta) -> int:
        w = t.wake_ups
        async with self.db.transaction() as conn:
            result = await conn.execute(
                w.delete().where(
                    w.c.status != "pending", w.c.updated_at < sa.func.now() - older_than
                )
            )
        return result.rowcount or 0

    async def _enter_firing(self, conn: AsyncConnection) -> datetime:
        """Hold the pause gate for this transaction and return the database clock."""
        await conn.execute(sa.select(t.pause_gate.c.id).with_for_update(read=True))
        return (await conn.execute(sa.select(sa.func.now()))).scalar_one()

    # ---------------------------------------------------------------- schedules

    async def create_schedule(
        self,
        *,
        name: str,
        conversation_id: str,
        product: str,
        prompt: str,
        recurrence: Recurrence,
        anchor_at: datetime,
        next_fire_at: datetime,
        paused: bool,
        created_by: str,
        max_per_conversation: int,
        submission_id: str = "",
        request_hash: str = "",
    ) -> tuple[Schedule, bool]:
        """A schedule, or the one this retry key created already (S4); and whether it
        is new."""
        row, created = await self._create_attached(
            t.schedules,
            "schedule",
            conversation_id=conversation_id,
            created_by=created_by,
            submission_id=submission_id,
            request_hash=request_hash,
            max_per_conversation=max_per_conversation,
            values={
                "id": uuid.uuid4(),
                "name": name,
                "product": product,
                "prompt": prompt,
                "cron": recurrence.cron,
                "interval_seconds": recurrence.interval_seconds,
                "time_zone": recurrence.time_zone,
                "anchor_at": anchor_at,
                "next_fire_at": next_fire_at,
                "paused": paused,
            },
        )
        return _schedule(row), created

    async def _create_attached(
        self,
        table: sa.Table,
        what: str,
        *,
        conversation_id: str,
        created_by: str,
        submission_id: str,
        request_hash: str,
        max_per_conversation: int,
        values: dict[str, Any],
    ) -> tuple[Any, bool]:
        """Insert a schedule or webhook of a conversation, or find the one this retry key
        made already; (its row, whether it is new). Creates of a kind for a conversation
        take turns, so the retry check and the limit hold under concurrency."""
        try:
            async with self.db.transaction() as conn:
                await _take_turns(conn, f"{what}s", conversation_id)
                earlier = await _retried(
                    conn,
                    table,
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what=what,
                )
                if earlier is not None:
                    return earlier, False
                await _within_limit(
                    conn, table, conversation_id, max_per_conversation, f"{what}s", "delete one"
                )
                row = (
                    await conn.execute(
                        table.insert()
                        .values(
                            **values,
                            conversation_id=_uuid(conversation_id, "conversation"),
                            created_by=created_by,
                            **_retry_key_values(submission_id, request_hash),
                        )
                        .returning(*table.c)
                    )
                ).one()
        except sa_exc.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise _retry_key_conflict(submission_id, what) from exc
        return row, True

    async def get_schedule(self, schedule_id: str) -> Schedule:
        s = t.schedules
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(s).where(s.c.id == _uuid(schedule_id, "schedule")))
            ).one_or_none()
        if row is None:
            raise NotFound(f"schedule {schedule_id!r} not found")
        return _schedule(row)

    async def update_schedule(
        self, schedule_id: str, change: Callable[[Schedule, datetime], dict[str, Any]]
    ) -> Schedule:
        """Lock the schedule, let `change(schedule, now)` say which columns to set, save.

        The lock waits for a firing of this schedule to commit, so an update never
        races the bookkeeping of an occurrence.
        """
        s = t.schedules
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(s).where(s.c.id == _uuid(schedule_id, "schedule")).with_for_update()
                )
            ).one_or_none()
            if row is None:
                raise NotFound(f"schedule {schedule_id!r} not found")
            now = (await conn.execute(sa.select(sa.func.now()))).scalar_one()
            values = change(_schedule(row), now)
            if not values:
                return _schedule(row)
            values["updated_at"] = sa.func.now()
            row = (
                await conn.execute(
                    s.update().where(s.c.id == row.id).values(**values).returning(*s.c)
                )
            ).one()
        return _schedule(row)

    async def delete_schedule(self, schedule_id: str) -> None:
        s = t.schedules
        async with self.db.transaction() as conn:
            await conn.execute(s.delete().where(s.c.id == _uuid(schedule_id, "schedule")))

    async def list_schedules(
        self,
        *,
        conversation_id: str,
        product: str,
        created_by: str | None,
        after: int,
        limit: int,
    ) -> Page:
        query = _listing(
            t.schedules,
            conversation_id=conversation_id,
            product=product,
            created_by=created_by,
            after=after,
        )
        return await self._page(query, _schedule, limit, after)

    async def fire_due_schedules(
        self,
        limit: int,
        deliver: Callable[[list[Due]], Awaitable[list[tuple[FireOutcome, datetime]]]],
    ) -> list[tuple[Due, FireOutcome]]:
        """Claim due occurrences, deliver them, then move each schedule to its next time.

        `deliver` returns each outcome with the schedule's next fire time, which is
        after the database clock: occurrences missed meanwhile collapse into this one.
        """
        s = t.schedules
        next_fire: dict[Any, datetime] = {}

        def claimable(now: datetime) -> list[sa.ColumnElement[bool]]:
            return [~s.c.paused, s.c.next_fire_at <= now, _not_paused(s.c.product)]

        async def deliver_all(dues: list[Due]) -> list[tuple[Due, FireOutcome]]:
            results = await deliver(dues)
            for due, (_, next_fire_at) in zip(dues, results, strict=True):
                next_fire[due.item.id] = next_fire_at
            return [(due, outcome) for due, (outcome, _) in zip(dues, results, strict=True)]

        async def record(conn: AsyncConnection, fired: list[tuple[Due, FireOutcome]]) -> None:
            delivered = [due.item.id for due, out in fired if isinstance(out, Delivered)]
            failed = [
                {"b_id": due.item.id, "b_next": next_fire[due.item.id], "b_error": out.error}
                for due, out in fired
                if isinstance(out, Failed)
            ]  # a Retry keeps the same occurrence and key for the next tick
            if delivered:
                await conn.execute(
                    _SCHEDULES_FIRED,
                    {"ids": delivered, "nexts": [next_fire[i] for i in delivered]},
                )
            if failed:
                await conn.execute(_SCHEDULE_FAILED, failed)

        return await self._fire(
            s, claimable, s.c.next_fire_at, _schedule, limit, deliver_all, record
        )

    async def _fire(
        self,
        table: sa.Table,
        claimable: Callable[[datetime], list[sa.ColumnElement[bool]]],
        order_by: sa.ColumnElement[Any],
        convert: Callable[[Any], Any],
        limit: int,
        deliver: Callable[[list[Due]], Awaitable[list[tuple[Due, FireOutcome]]]],
        record: Callable[[AsyncConnection, list[tuple[Due, FireOutcome]]], Awaitable[None]],
    ) -> list[tuple[Due, FireOutcome]]:
        """The firing transaction (S6): lock a due batch, deliver, record, commit.

        `record` writes the delivered occurrences with one UPDATE over arrays and the
        rare failures with an executemany, not one statement per row.
        """
        async with self.db.transaction() as conn:
            now = await self._enter_firing(conn)
            rows = (
                await conn.execute(
                    sa.select(table)
                    .where(*claimable(now))
                    .order_by(order_by)
                    .limit(limit)
                    .with_for_update(skip_locked=True, of=table)
                )
            ).all()
            if not rows:
                return []
            fired = await deliver([Due(convert(r), now) for r in rows])
            await record(conn, fired)
        return fired

    # ------------------------------------------------------------------- pauses

    async def pause(self, product: str, reason: str, paused_by: str) -> list[PauseEntry]:
        async with self.db.transaction() as conn:
            await self._close_gate(conn)
            await conn.execute(
                pg_insert(t.pauses)
                .values(product=product, reason=reason, paused_by=paused_by)
                .on_conflict_do_nothing(index_elements=["product"])
            )
            return await self._pauses(conn)

    async def resume(self, product: str) -> tuple[bool, list[PauseEntry]]:
        """Lift the pause of exactly this scope: (whether there was one, the pauses left)."""
        async with self.db.transaction() as conn:
            await self._close_gate(conn)
            lifted = await conn.execute(t.pauses.delete().where(t.pauses.c.product == product))
            return bool(lifted.rowcount), await self._pauses(conn)

    async def pauses(self) -> list[PauseEntry]:
        async with self.db.transaction() as conn:
            return await self._pauses(conn)

    async def _close_gate(self, conn: AsyncConnection) -> None:
        """Wait for in-flight firings; later firings wait for this transaction."""
        await conn.execute(t.pause_gate.update().values(changed_at=sa.func.now()))

    async def _pauses(self, conn: AsyncConnection) -> list[PauseEntry]:
        rows = (await conn.execute(sa.select(t.pauses).order_by(t.pauses.c.product))).all()
        return [PauseEntry(r.product, r.reason, r.paused_by, r.paused_at) for r in rows]

    # ----------------------------------------------------------------- webhooks

    async def create_webhook(
        self,
        *,
        webhook_id: str,
        name: str,
        conversation_id: str,
        product: str,
        salt: str,
        secret_fingerprint: str,
        created_by: str,
        secret: str,
        max_per_conversation: int,
        submission_id: str = "",
        request_hash: str = "",
    ) -> Webhook:
        """A webhook with this id and secret, or the one this retry key created already
        (returned without its secret: the service decides whether to give it again)."""
        row, new = await self._create_attached(
            t.webhooks,
            "webhook",
            conversation_id=conversation_id,
            created_by=created_by,
            submission_id=submission_id,
            request_hash=request_hash,
            max_per_conversation=max_per_conversation,
            values={
                "id": webhook_id,
                "name": name,
                "product": product,
                "salt": salt,
                "secret_fingerprint": secret_fingerprint,
            },
        )
        return _webhook(row, secret) if new else _webhook(row)

    async def get_webhook(self, webhook_id: str) -> Webhook:
        h = t.webhooks
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(h).where(h.c.id == _uuid(webhook_id, "webhook")))
            ).one_or_none()
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return _webhook(row)

    async def rotate_webhook_secret(
        self, webhook_id: str, *, salt: str, secret_fingerprint: str, secret: str
    ) -> Webhook:
        h = t.webhooks
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    h.update()
                    .where(h.c.id == _uuid(webhook_id, "webhook"))
                    .values(
                        salt=salt,
                        secret_fingerprint=secret_fingerprint,
                        secret_rotated_at=sa.func.now(),
                    )
                    .returning(*h.c)
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return _webhook(row, secret)

    async def delete_webhook(self, webhook_id: str) -> None:
        async with self.db.transaction() as conn:
            await conn.execute(
                t.webhooks.delete().where(t.webhooks.c.id == _uuid(webhook_id, "webhook"))
            )

    async def list_webhooks(
        self,
        *,
        conversation_id: str,
        product: str,
        created_by: str | None,
        after: int,
        limit: int,
    ) -> Page:
        query = _listing(
            t.webhooks,
            conversation_id=conversation_id,
            product=product,
            created_by=created_by,
            after=after,
        )
        return await self._page(query, _webhook, limit, after)

    async def receive_webhook(
        self,
        *,
        webhook_id: str,
        delivery_key: str,
        signature: str,
        body_sha256: str,
        deliver: Callable[[], Awaitable[Delivered]],
    ) -> Delivered:
        """Record the event in the replay window and deliver it, in one transaction.

        The receipt row is inserted first: a concurrent copy of the same event waits on
        its unique keys and then sees it as a replay. If delivering fails, the
        transaction rolls back and the sender may retry.
        """
        r = t.webhook_receipts
        async with self.db.transaction() as conn:
            inserted = (
                await conn.execute(
                    pg_insert(r)
                    .values(
                        webhook_id=webhook_id,
                        delivery_key=delivery_key,
                        signature=signature,
                        body_sha256=body_sha256,
                    )
                    .on_conflict_do_nothing()
                    .returning(r.c.webhook_id)
                )
            ).first()
            if inserted is None:
                earlier = (
                    await conn.execute(
                        sa.select(r.c.delivery_key, r.c.received_at).where(
                            r.c.webhook_id == webhook_id,
                            sa.or_(r.c.delivery_key == delivery_key, r.c.signature == signature),
                        )
                    )
                ).first()
                when = earlier.received_at.isoformat() if earlier else "earlier"
                what = (
                    f"delivery {delivery_key!r}"
                    if earlier is None or earlier.delivery_key == delivery_key
                    else f"this signature (delivery {earlier.delivery_key!r})"
                )
                raise Conflict(
                    f"replayed webhook event: {what} was already received at {when}; "
                    "nothing was delivered again — send each new event with a new "
                    "X-AgentWorks-Delivery id, a current timestamp and a fresh signature"
                )
            delivered = await deliver()
            await conn.execute(
                r.update()
                .where(r.c.webhook_id == webhook_id, r.c.delivery_key == delivery_key)
                .values(delivery_id=delivered.delivery_id)
            )
        return delivered

    async def purge_webhook_receipts(self, older_than: timedelta) -> int:
        r = t.webhook_receipts
        async with self.db.transaction() as conn:
            result = await conn.execute(
                r.delete().where(r.c.received_at < sa.func.now() - older_than)
            )
        return result.rowcount or 0


# The outcomes of a firing batch (see SchedulerStore._fire): the delivered ones in one
# statement over arrays, the rare failures as one executemany.
_w, _s = t.wake_ups, t.schedules
_WAKE_UPS_FIRED = sa.text(
    """
UPDATE scheduler.wake_ups w
SET status = 'fired', fired_at = clock_timestamp(), updated_at = clock_timestamp(),
    delivery_id = b.delivery_id, late_seconds = b.late_seconds
FROM unnest(CAST(:ids AS uuid[]), CAST(:deliveries AS uuid[]), CAST(:lates AS float8[]))
    AS b (id, delivery_id, late_seconds)
WHERE w.id = b.id
"""
)
_WAKE_UP_FAILED = (
    _w.update()
    .where(_w.c.id == sa.bindparam("b_id"))
    .values(status="failed", error=sa.bindparam("b_error"), updated_at=sa.func.clock_timestamp())
)
_SCHEDULES_FIRED = sa.text(
    """
UPDATE scheduler.schedules s
SET next_fire_at = b.next_fire_at, last_fired_at = clock_timestamp(),
    fire_count = s.fire_count + 1, last_error = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:nexts AS timestamptz[])) AS b (id, next_fire_at)
WHERE s.id = b.id
"""
)
_SCHEDULE_FAILED = (
    _s.update()
    .where(_s.c.id == sa.bindparam("b_id"))
    .values(next_fire_at=sa.bindparam("b_next"), last_error=sa.bindparam("b_error"))
)
