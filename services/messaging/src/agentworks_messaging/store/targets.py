"""Targets' messaging settings (C1, C8)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.client.errors import NotFound
from agentworks_messaging import tables as t
from agentworks_messaging.models import (
    Target,
    TargetKey,
)
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import _target


class TargetQueries(MessagingStoreBase):
    async def put_target(self, key: TargetKey, owner: str, free_text_ask: bool | None) -> Target:
        """Create the target, or give an existing one this owner. A capability not given
        (None) keeps its stored value: registering again never undoes an owner's setting."""
        changes: dict[str, Any] = {"owner": owner, "updated_at": sa.func.now()}
        if free_text_ask is not None:
            changes["free_text_ask"] = free_text_ask
        stmt = (
            pg_insert(t.targets)
            .values(kind=key.kind, name=key.name, owner=owner, free_text_ask=free_text_ask)
            .on_conflict_do_update(index_elements=["kind", "name"], set_=changes)
            .returning(*t.targets.c)
        )
        async with self.db.transaction() as conn:
            return _target((await conn.execute(stmt)).one())

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(t.targets).where(
                        t.targets.c.kind == key.kind, t.targets.c.name == key.name
                    )
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return _target(row)

    async def update_target(self, key: TargetKey, free_text_ask: bool | None) -> Target:
        stmt = (
            t.targets.update()
            .where(t.targets.c.kind == key.kind, t.targets.c.name == key.name)
            .values(free_text_ask=free_text_ask, updated_at=sa.func.now())
            .returning(*t.targets.c)
        )
        async with self.db.transaction() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return _target(row)
