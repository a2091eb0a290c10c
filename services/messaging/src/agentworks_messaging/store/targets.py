"""Targets and their messaging switch (C1, C8)."""

from __future__ import annotations

from agentworks.core.errors import Conflict, NotFound, Reason
from agentworks_messaging.models import Capabilities, Target, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase, Q
from agentworks_messaging.store.rows import target_from


class TargetQueries(MessagingStoreBase):
    async def put_target(self, key: TargetKey, owner: str, caps: Capabilities) -> Target:
        """Create the target, or give an existing one this owner. A capability not given
        (None) keeps its stored value: registering again never undoes an owner's setting."""
        params = {"kind": key.kind, "name": key.name, "owner": owner}
        async with self.db.raw(transaction=True) as pg:
            other = await Q.value(pg, "look_alike", params)
            if other is not None:
                raise Conflict(
                    f"{key} differs only by case from the registered {key.kind}:{other}; "
                    "names that look alike are refused (a spoofing aid): choose another",
                    reason=Reason.NAME_TAKEN,
                    metadata={"field": "ref.name", "existing": f"{key.kind}:{other}"},
                )
            row = await Q.one(pg, "put_target", {**params, **_caps(caps)})
            return target_from(row)

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_target", {"kind": key.kind, "name": key.name})
        if row is None:
            raise NotFound(f"{key} is not registered")
        return target_from(row)

    async def update_target(self, key: TargetKey, caps: Capabilities) -> Target:
        """Change the capabilities given; one not given (None) keeps its stored value."""
        params = {"kind": key.kind, "name": key.name, **_caps(caps)}
        async with self.db.raw() as pg:
            row = await Q.one(pg, "update_target", params)
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
        async with self.db.raw() as pg:
            rows = await Q.all(pg, "list_targets", params)
        return [target_from(r) for r in rows]


def _caps(caps: Capabilities) -> dict[str, bool | None]:
    return {"free_text_ask": caps.free_text_ask, "a2a_card": caps.a2a_card}
