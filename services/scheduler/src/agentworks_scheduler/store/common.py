"""What every store module shares: row converters, named queries, locks and the base class."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentworks.core.checks import is_retry, key_reused
from agentworks.core.errors import AgentWorksError, Busy, Conflict, NotFound, Reason
from agentworks.server.db import Database
from agentworks.server.queries import Queries
from agentworks_scheduler.models import Page, Recurrence, Schedule, WakeUp, Webhook

# Every statement of the store, by name, from ../queries.sql (read once, at import).
Q = Queries.load("agentworks_scheduler")

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


def due_params(when: When) -> dict[str, Any]:
    """A wake-up's time as the queries take it: an instant, or a delay from the database
    clock."""
    if isinstance(when, timedelta):
        return {"due_at": None, "delay": when}
    return {"due_at": when, "delay": None}


async def wait_for_delivery(pg: psycopg.AsyncConnection, lock: int, row_id: uuid.UUID) -> None:
    """Wait (in this transaction) until no replica is delivering the row `row_id`; until
    the transaction ends, no replica starts to (see store/firing.py)."""
    await Q.execute(pg, "wait_for_delivery", {"lock": lock, "row_id": str(row_id)})


class Session:
    """A pooled connection of its own, outside any transaction between the short ones
    run on it (`async with session.pg.transaction()`), for session-level advisory locks
    held while another service is called."""

    def __init__(self, pg: psycopg.AsyncConnection) -> None:
        self.pg = pg

    def in_transaction(self) -> bool:
        return self.pg.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


@contextlib.asynccontextmanager
async def session(db: Database) -> AsyncIterator[Session]:
    """A `Session`. On the way out its locks are released; if the connection may be in
    doubt (anything but a refusal failed) it is closed instead, which releases them too
    (the pool does not take a closed connection back)."""
    async with db.raw() as pg:
        try:
            yield Session(pg)
        except AgentWorksError:
            await _release(pg)
            raise
        except BaseException:
            await _drop(pg)
            raise
        await _release(pg)


async def _release(pg: psycopg.AsyncConnection) -> None:
    if pg.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        await _drop(pg)
        return
    try:
        await Q.execute(pg, "unlock_all")
    except Exception:  # closing the connection releases them as well
        await _drop(pg)


async def _drop(pg: psycopg.AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await pg.close()


def retry_key_conflict(submission_id: str, what: str = "wake-up") -> Conflict:
    return key_reused(submission_id, f"a different {what}")


async def retried(
    pg: psycopg.AsyncConnection,
    query: str,
    *,
    created_by: str,
    submission_id: str,
    request_hash: str,
    what: str,
    legacy_hash: str = "",
) -> Any | None:
    """The row this creator's retry key made already (`query`: the kind's look-up; None:
    none, or no key); the key with a different request is refused."""
    if not submission_id:
        return None
    earlier = await Q.one(pg, query, {"created_by": created_by, "submission_id": submission_id})
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
    *, conversation_id: str, product: str, after: int, limit: int, visible_to: Viewer = None
) -> dict[str, Any]:
    """The parameters of a `list_*` query: rows past the cursor `after` in creation order,
    of one conversation and one product when they are given (empty: any), that
    `visible_to` may see."""
    principal, products = visible_to if visible_to is not None else (None, frozenset[str]())
    return {
        "after": after,
        "conversation_id": as_uuid(conversation_id, "conversation") if conversation_id else None,
        "product": product,
        "principal": principal,
        "products": sorted(products),
        "limit": limit,
    }


async def take_turns(pg: psycopg.AsyncConnection, what: str, conversation_id: str) -> None:
    """Creates of one kind for one conversation take turns (a transaction-scoped lock),
    so a limit is exact under concurrency and across replicas, and a retry finds its twin."""
    conv = as_uuid(conversation_id, "conversation")
    await Q.execute(pg, "take_turns", {"key": f"{what}:{conv}"})


async def within_limit(
    pg: psycopg.AsyncConnection,
    query: str,
    conversation_id: str,
    limit: int,
    what: str,
    instead: str,
) -> None:
    """Busy when the conversation has `limit` rows (`query` counts them) already (call it
    after `take_turns`)."""
    conv = as_uuid(conversation_id, "conversation")
    count = await Q.value(pg, query, {"conversation_id": conv})
    if count >= limit:
        raise Busy(
            f"conversation {conversation_id} already has {count} {what} (the limit is "
            f"{limit}); {instead} first",
            reason=Reason.STORED_LIMIT,
            metadata={"conversation_id": conversation_id, "counted": what, "limit": str(limit)},
        )


class StoreBase:
    """The database handle and the helpers the store modules share."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def _page(
        self, query: str, params: dict[str, Any], convert: Callable[[Any], Any], after: int
    ) -> Page:
        """The rows of a `list_*` query as one page; its cursor is the last row's seq."""
        async with self.db.raw() as pg:
            rows = await Q.all(pg, query, params)
        items = [convert(r) for r in rows]
        return Page(items, items[-1].seq if items else after)

    async def _create_attached(
        self,
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
        """Insert a schedule or webhook (`what`) of a conversation, or find the one this
        retry key made already; (its row, whether it is new). Creates of a kind for a
        conversation take turns, so the retry check and the limit hold under concurrency."""
        try:
            async with self.db.raw(transaction=True) as pg:
                await take_turns(pg, f"{what}s", conversation_id)
                earlier = await retried(
                    pg,
                    f"{what}_by_key",
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what=what,
                    legacy_hash=legacy_hash,
                )
                if earlier is not None:
                    return earlier, False
                await within_limit(
                    pg,
                    f"{what}s_of_conversation",
                    conversation_id,
                    max_per_conversation,
                    f"{what}s",
                    "delete one",
                )
                row = await Q.one(
                    pg,
                    f"create_{what}",
                    {
                        **values,
                        "conversation_id": as_uuid(conversation_id, "conversation"),
                        "created_by": created_by,
                        **retry_key_values(submission_id, request_hash),
                    },
                )
        except psycopg.errors.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise retry_key_conflict(submission_id, what) from exc
        return row, True
