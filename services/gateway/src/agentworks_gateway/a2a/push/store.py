"""The SQL of A2A push configs (X2, N2), by named query: each config with its
webhooks-out endpoint (kind `a2a_push`), its follower's lease and the last state
stored for delivery. Deliveries are webhooks out's rows (`delivery_insert`)."""

from __future__ import annotations

import json
from typing import Any

from agentworks.server.db import Database
from agentworks_gateway.a2a.push.wire import PushConfig
from agentworks_gateway.store import Q, _watched


def _config(row: Any) -> PushConfig:
    return PushConfig(
        endpoint_id=row.endpoint_id,
        call_id=row.call_id,
        config_id=row.config_id,
        principal=row.principal,
        url=row.url,
        token=row.token,
        auth_scheme=row.auth_scheme,
        created_at=row.created_at,
        last_state=row.last_state,
        done_at=row.done_at,
        last_error=row.last_error,
    )


class PushStore:
    """A2A push configs in the gateway's schema."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def replace(
        self,
        *,
        endpoint_id: str,
        principal: str,
        call_id: str,
        config_id: str,
        url: str,
        secret: str,
        headers: dict[str, str],
        token: str,
        auth_scheme: str,
        max_configs: int,
    ) -> PushConfig | None:
        """Store a config (replacing the principal's one with the same id on this task);
        None when the task already has `max_configs` others."""
        key = {"call_id": call_id, "config_id": config_id, "principal": principal}
        async with _watched("a2a_push"), self.database.raw(transaction=True) as pg:
            await Q.execute(pg, "push_lock", {"call_id": call_id})
            await Q.execute(pg, "push_replace_old", key)
            if await Q.value(pg, "push_count", {"call_id": call_id}) >= max_configs:
                return None
            endpoint = {
                "endpoint_id": endpoint_id,
                "principal": principal,
                "url": url,
                "description": f"A2A push config {config_id} of task {call_id}"[:500],
                "secret": secret,
                "headers": json.dumps(headers),
            }
            await Q.execute(pg, "push_endpoint_insert", endpoint)
            params = {
                **key,
                "endpoint_id": endpoint_id,
                "token": token,
                "auth_scheme": auth_scheme,
                "url": url,
            }
            row = await Q.one(pg, "push_config_insert", params)
        return _config(row)

    async def configs(
        self, call_id: str, principal: str, config_id: str | None = None
    ) -> list[PushConfig]:
        """The principal's configs of a task (or the one with `config_id`), oldest first."""
        params = {"call_id": call_id, "principal": principal, "config_id": config_id}
        async with _watched("a2a_push"), self.database.raw() as pg:
            rows = await Q.all(pg, "push_configs_of", params)
        return [_config(r) for r in rows]

    async def delete(self, call_id: str, config_id: str, principal: str) -> bool:
        """Delete the principal's config (its endpoint and deliveries); False if none."""
        params = {"call_id": call_id, "config_id": config_id, "principal": principal}
        async with _watched("a2a_push"), self.database.raw() as pg:
            return await Q.one(pg, "push_delete", params) is not None

    # ---------------------------------------------------------------- followers

    async def claim(self, replica: str, *, lease_seconds: float, limit: int) -> list[PushConfig]:
        """Configs of open tasks nobody follows, now this replica's to follow."""
        params = {"replica": replica, "lease_seconds": lease_seconds, "limit": limit}
        async with _watched("a2a_push"), self.database.raw() as pg:
            rows = await Q.all(pg, "push_claim", params)
        return [_config(r) for r in rows]

    async def renew(self, replica: str, *, lease_seconds: float) -> set[str]:
        """Extend this replica's leases; the endpoint ids of the configs it still holds."""
        params = {"replica": replica, "lease_seconds": lease_seconds}
        async with _watched("a2a_push"), self.database.raw() as pg:
            rows = await Q.all(pg, "push_renew", params)
        return {r.endpoint_id for r in rows}

    async def release(self, endpoint_id: str, replica: str) -> None:
        params = {"endpoint_id": endpoint_id, "replica": replica}
        async with _watched("a2a_push"), self.database.raw() as pg:
            await Q.execute(pg, "push_release", params)

    async def advance(
        self,
        config: PushConfig,
        replica: str,
        *,
        state: str,
        delivery: dict[str, Any],
        done: bool,
        retry_seconds: float,
    ) -> bool:
        """Store the push of a new state and the state as the config's last, in one
        transaction; False (nothing written) when this replica lost the lease."""
        advance = {
            "endpoint_id": config.endpoint_id,
            "replica": replica,
            "state": state,
            "done": done,
        }
        async with _watched("a2a_push"), self.database.raw(transaction=True) as pg:
            if await Q.one(pg, "push_advance", advance) is None:
                return False
            params = {**delivery, "endpoint_id": config.endpoint_id, "retry_seconds": retry_seconds}
            await Q.one(pg, "delivery_insert", params)
        return True

    async def error(self, config: PushConfig, replica: str, error: str, *, done: bool) -> None:
        params = {
            "endpoint_id": config.endpoint_id,
            "replica": replica,
            "error": error,
            "done": done,
        }
        async with _watched("a2a_push"), self.database.raw() as pg:
            await Q.execute(pg, "push_error", params)
