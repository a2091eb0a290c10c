"""Targets and their messaging switch (C1, C8)."""

from __future__ import annotations

from agentworks.core.errors import Conflict, NotFound
from agentworks.server.db import fixed_sql
from agentworks_messaging.models import Target, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import target_from

# Create the target, or give an existing one this owner; a capability given as NULL
# keeps the stored value.
PUT_TARGET = fixed_sql(
    """
INSERT INTO messaging.targets AS t (kind, name, owner, free_text_ask)
VALUES (:kind, :name, :owner, :free_text_ask)
ON CONFLICT (kind, name) DO UPDATE
SET owner = excluded.owner,
    updated_at = now(),
    free_text_ask = coalesce(excluded.free_text_ask, t.free_text_ask)
RETURNING *
"""
)

# A registered target whose name differs from :name only by case (B10): one stored
# before names had to be lower-case. New names are lower-case, so none can appear
# between this look-up and the insert that follows it.
LOOK_ALIKE = fixed_sql(
    """
SELECT name FROM messaging.targets
WHERE kind = :kind AND lower(name) = lower(:name) AND name <> :name
LIMIT 1
"""
)

GET_TARGET = fixed_sql("SELECT * FROM messaging.targets WHERE kind = :kind AND name = :name")

# :viewer NULL is the operator (every target); else the targets it owns. Keyset on
# (kind, name), the primary key.
LIST_TARGETS = fixed_sql(
    """
SELECT * FROM messaging.targets
WHERE (CAST(:viewer AS text) IS NULL OR owner = CAST(:viewer AS text))
  AND (CAST(:after_kind AS text) IS NULL
       OR (kind, name) > (CAST(:after_kind AS text), CAST(:after_name AS text)))
ORDER BY kind, name
LIMIT :limit
"""
)

UPDATE_TARGET = fixed_sql(
    """
UPDATE messaging.targets SET free_text_ask = :free_text_ask, updated_at = now()
WHERE kind = :kind AND name = :name
RETURNING *
"""
)


class TargetQueries(MessagingStoreBase):
    async def put_target(self, key: TargetKey, owner: str, free_text_ask: bool | None) -> Target:
        """Create the target, or give an existing one this owner. A capability not given
        (None) keeps its stored value: registering again never undoes an owner's setting."""
        params = {"kind": key.kind, "name": key.name, "owner": owner}
        async with self.db.transaction() as conn:
            other = (await conn.exec_driver_sql(LOOK_ALIKE, params)).scalar_one_or_none()
            if other is not None:
                raise Conflict(
                    f"{key} differs only by case from the registered {key.kind}:{other}; "
                    "names that look alike are refused (a spoofing aid): choose another",
                    metadata={"field": "ref.name", "existing": f"{key.kind}:{other}"},
                )
            result = await conn.exec_driver_sql(
                PUT_TARGET, {**params, "free_text_ask": free_text_ask}
            )
            return target_from(result.one())

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.transaction() as conn:
            result = await conn.exec_driver_sql(GET_TARGET, {"kind": key.kind, "name": key.name})
            row = result.one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return target_from(row)

    async def update_target(self, key: TargetKey, free_text_ask: bool | None) -> Target:
        params = {"kind": key.kind, "name": key.name, "free_text_ask": free_text_ask}
        async with self.db.transaction() as conn:
            row = (await conn.exec_driver_sql(UPDATE_TARGET, params)).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return target_from(row)

    async def list_targets(
        self, *, viewer: str | None, after: tuple[str, str] | None, limit: int
    ) -> list[Target]:
        """Up to `limit` targets owned by `viewer` (None: all) after the key `after`."""
        params = {
            "viewer": viewer,
            "after_kind": after[0] if after else None,
            "after_name": after[1] if after else None,
            "limit": limit,
        }
        async with self.db.transaction() as conn:
            rows = (await conn.exec_driver_sql(LIST_TARGETS, params)).all()
        return [target_from(r) for r in rows]
