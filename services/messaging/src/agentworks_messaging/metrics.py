"""Messaging's own Prometheus metrics (P4): the turn queue, per target.

The core metrics (RPCs, pool, long-polls) are in `agentworks.server.metrics`. These gauges
describe the whole database, not this process: every replica reports the same values
(aggregate with max(), not sum()). `refresh` recomputes them with one query, every
`MESSAGING_METRICS_REFRESH_SECONDS`, only while metrics are served.
"""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from prometheus_client import Gauge

from agentworks.server.db import Database
from agentworks.server.metrics import inline_sql, publish, refresher
from agentworks_messaging import tables as t
from agentworks_messaging.config import Config

TURNS_QUEUED = Gauge(
    "agentworks_messaging_turns_queued",
    "Conversations with pending deliveries and no turn running: turns waiting to be claimed.",
    ["target"],
)
TURN_QUEUE_AGE = Gauge(
    "agentworks_messaging_turn_queue_age_seconds",
    "How long the oldest pending delivery of a queued turn has waited (0: none queued).",
    ["target"],
)
TURNS_ACTIVE = Gauge(
    "agentworks_messaging_turns_active",
    "Turns claimed by a runtime and not completed or interrupted yet.",
    ["target"],
)


def _turn_queue() -> sa.Select:
    """Per registered target: queued turns, the oldest one's age, active turns.

    Only the live parts of the tables are read, through partial indexes:
    `conversations_claimable` (pending work, no turn) and `turns_active_lease` (active
    turns, each joined to its conversation by primary key). Message and delivery
    history is never scanned.
    """
    c, tu, tg = t.conversations, t.turns, t.targets
    queued = (
        sa.select(
            c.c.target_kind,
            c.c.target_name,
            sa.func.count().label("n"),
            sa.func.min(c.c.oldest_pending_at).label("oldest"),
        )
        .where(c.c.pending_deliveries > 0, c.c.active_turn_id.is_(None))
        .group_by(c.c.target_kind, c.c.target_name)
        .subquery("queued")
    )
    active = (
        sa.select(c.c.target_kind, c.c.target_name, sa.func.count().label("n"))
        .select_from(tu.join(c, c.c.id == tu.c.conversation_id))
        .where(tu.c.status == "active")
        .group_by(c.c.target_kind, c.c.target_name)
        .subquery("active")
    )
    return sa.select(
        tg.c.kind,
        tg.c.name,
        sa.func.coalesce(queued.c.n, 0).label("queued"),
        sa.func.coalesce(sa.extract("epoch", sa.func.now() - queued.c.oldest), 0).label("age"),
        sa.func.coalesce(active.c.n, 0).label("active"),
    ).select_from(
        tg.outerjoin(
            queued,
            sa.and_(queued.c.target_kind == tg.c.kind, queued.c.target_name == tg.c.name),
        ).outerjoin(
            active,
            sa.and_(active.c.target_kind == tg.c.kind, active.c.target_name == tg.c.name),
        )
    )


_SQL = inline_sql(_turn_queue())


async def refresh(db: Database) -> None:
    """Recompute the turn-queue gauges (one statement)."""
    async with db.autocommit() as conn:
        rows = (await conn.exec_driver_sql(_SQL)).all()
    publish(TURNS_QUEUED, {(f"{r.kind}:{r.name}",): r.queued for r in rows})
    publish(TURN_QUEUE_AGE, {(f"{r.kind}:{r.name}",): max(0.0, float(r.age)) for r in rows})
    publish(TURNS_ACTIVE, {(f"{r.kind}:{r.name}",): r.active for r in rows})


def start_refresh(db: Database, config: Config) -> list[asyncio.Task[None]]:
    """The task that keeps the gauges fresh while metrics are served (else none)."""
    return refresher(config.service, lambda: refresh(db))
