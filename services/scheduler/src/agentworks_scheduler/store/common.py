"""What every store module shares: row converters, query pieces, locks and the base class."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.core.checks import is_retry, key_reused
from agentworks.core.errors import AgentWorksError, Busy, Conflict, NotFound
from agentworks.server.db import Database, translate_outages
from agentworks_scheduler import tables as t
from agentworks_scheduler.models import Page, Recurrence, Schedule, WakeUp, Webhook

# A wake-up's time: an absolute instant, or a delay from the database clock.
When = datetime | timedelta

# Advisory lock classes (the two-int key space, apart from the one-bigint keys other
# code uses): the pause gate, and one lock per wake-up, schedule and webhook event
# held while it is being delivered (see store/firing.py).
GATE_LOCK = 0x5C4E_0001
WAKE_UP_LOCK = 0x5C4E_0002
SCHEDULE_LOCK = 0x5C4E_0003
WEBHOOK_DELIVERY_LOCK = 0x5C4E_0004
WEBHOOK_SIGNATURE_LOCK = 0x5C4E_0005


def wake_up(row: Any) -> WakeUp:
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


def schedule(row: Any) -> Schedule:
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


def webhook(row: Any, secret: str = "") -> Webhook:
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


def as_uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"{what} {value!r} not found") from None


def due_value(when: When) -> Any:
    return sa.func.now() + when if isinstance(when, timedelta) else when


def not_paused(product: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    """No pause covers this product: not global, not the product, not its whole kind."""
    return ~paused(product)


def paused(product: sa.ColumnElement[str]) -> sa.Exists:
    """A pause covers this product: global, the product, or its whole kind."""
    p = t.pauses
    return sa.exists().where(
        sa.or_(
            p.c.product == "",
            p.c.product == product,
            p.c.product == sa.func.split_part(product, ":", 1) + ":*",
        )
    )


def lock_key(value: str | sa.ColumnElement[Any]) -> sa.ColumnElement[int]:
    """The second half of a row's advisory lock key: its id (as text), hashed."""
    if isinstance(value, sa.ColumnElement):
        value = sa.cast(value, sa.Text)
    return sa.func.hashtext(value)


async def wait_for_delivery(conn: AsyncConnection, lock: int, row_id: uuid.UUID) -> None:
    """Wait (in this transaction) until no replica is delivering the row `row_id`; until
    the transaction ends, no replica starts to (see store/firing.py)."""
    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(lock, lock_key(str(row_id)))))


@contextlib.asynccontextmanager
async def session(db: Database) -> AsyncIterator[AsyncConnection]:
    """A connection of its own, outside any transaction between the short ones run on
    it (`async with conn.begin()`), for session-level advisory locks held while another
    service is called. On the way out the locks are released; if the connection may be
    in doubt (anything but a refusal failed) it is dropped instead, which releases them
    too."""
    with translate_outages():
        async with db.engine.connect() as conn:
            try:
                yield conn
            except AgentWorksError:
                await _release(conn)
                raise
            except BaseException:
                await _drop(conn)
                raise
            await _release(conn)


async def _release(conn: AsyncConnection) -> None:
    if conn.in_transaction():
        await _drop(conn)
        return
    try:
        async with conn.begin():
            await conn.execute(sa.select(sa.func.pg_advisory_unlock_all()))
    except Exception:  # dropping the connection releases them as well
        await _drop(conn)


async def _drop(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await conn.invalidate()


def retry_key_conflict(submission_id: str, what: str = "wake-up") -> Conflict:
    return key_reused(submission_id, f"a different {what}")


async def retried(
    conn: Any,
    table: sa.Table,
    *,
    created_by: str,
    submission_id: str,
    request_hash: str,
    what: str,
    legacy_hash: str = "",
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
    if earlier is None:
        return None
    is_retry(
        submission_id,
        earlier.request_hash,
        request_hash,
        f"a different {what}",
        legacy_hash=legacy_hash,
    )  # the same request, or refused
    return earlier


def retry_key_values(submission_id: str, request_hash: str) -> dict[str, Any]:
    return {
        "submission_id": submission_id or None,
        "request_hash": request_hash if submission_id else None,
    }


# Who a list is for: (principal, products). It shows the rows that principal created and
# those of these products; None shows every row.
Viewer = tuple[str, frozenset[str]] | None


def listing(
    table: sa.Table,
    *,
    conversation_id: str,
    product: str,
    after: int,
    visible_to: Viewer = None,
) -> sa.Select:
    """Rows of `table` past the cursor `after` in creation order, of one conversation and
    one product when they are given (empty: any), that `visible_to` may see."""
    query = sa.select(table).where(table.c.seq > after).order_by(table.c.seq)
    if conversation_id:
        query = query.where(table.c.conversation_id == as_uuid(conversation_id, "conversation"))
    if product:
        query = query.where(table.c.product == product)
    if visible_to is not None:
        principal, products = visible_to
        visible = table.c.created_by == principal
        if products:
            visible = sa.or_(visible, table.c.product.in_(sorted(products)))
        query = query.where(visible)
    return query


async def take_turns(conn: Any, what: str, conversation_id: str) -> None:
    """Creates of one kind for one conversation take turns (a transaction-scoped lock),
    so a limit is exact under concurrency and across replicas, and a retry finds its twin."""
    conv = as_uuid(conversation_id, "conversation")
    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtext(f"{what}:{conv}"))))


async def within_limit(
    conn: Any, table: sa.Table, conversation_id: str, limit: int, what: str, instead: str
) -> None:
    """Busy when the conversation has `limit` rows of `table` already (call it after
    `take_turns`)."""
    conv = as_uuid(conversation_id, "conversation")
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


class StoreBase:
    """The database handle and the helpers the store modules share."""

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

    async def _create_attached(
        self,
        table: sa.Table,
        what: str,
        *,
        conversation_id: str,
        created_by: str,
        submission_id: str,
        request_hash: str,
        legacy_hash: str,
        max_per_conversation: int,
        values: dict[str, Any],
    ) -> tuple[Any, bool]:
        """Insert a schedule or webhook of a conversation, or find the one this retry key
        made already; (its row, whether it is new). Creates of a kind for a conversation
        take turns, so the retry check and the limit hold under concurrency."""
        try:
            async with self.db.transaction() as conn:
                await take_turns(conn, f"{what}s", conversation_id)
                earlier = await retried(
                    conn,
                    table,
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what=what,
                    legacy_hash=legacy_hash,
                )
                if earlier is not None:
                    return earlier, False
                await within_limit(
                    conn, table, conversation_id, max_per_conversation, f"{what}s", "delete one"
                )
                row = (
                    await conn.execute(
                        table.insert()
                        .values(
                            **values,
                            conversation_id=as_uuid(conversation_id, "conversation"),
                            created_by=created_by,
                            **retry_key_values(submission_id, request_hash),
                        )
                        .returning(*table.c)
                    )
                ).one()
        except sa_exc.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise retry_key_conflict(submission_id, what) from exc
        return row, True
