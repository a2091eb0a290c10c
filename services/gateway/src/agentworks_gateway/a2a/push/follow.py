"""Following the tasks of push configs (X2, N2): each config's call is followed by one
replica at a time, under a lease, on the functions service's push stream (`WatchCall`,
N1), read as the config's principal while that principal has a usable API token.

A new state (`wire.state_of`: the task's state, and each question) becomes a delivery
row of the config's webhooks-out endpoint, written in the transaction that stores the
state as the config's last (`PushStore.advance`): a follower that starts again (a
restart, a kill -9, a lease taken over) reads the call as it stands and pushes it only
if its state is not the one stored, so no state is missed at its latest and none is
stored twice; the delivery's id is derived from the config and the call's version,
so a state read twice is inserted once. The end's delivery marks the config done.
Webhooks out's dispatcher sends the rows (retries, backoff, signing).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Collection
from typing import Any

import structlog

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.a2a.push.store import PushStore
from agentworks_gateway.a2a.push.wire import EVENT_TYPE, PushConfig, push_body, state_of
from agentworks_gateway.a2a.tasks import call_task, small_files
from agentworks_gateway.a2a.watch import call_changes
from agentworks_gateway.call_tasks import task_view
from agentworks_gateway.webhooks_out.events import delivery_id
from agentworks_gateway.webhooks_out.leased import LeasedFollowers
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig

log = structlog.get_logger("agentworks.gateway.a2a_push")

# Configs one replica follows at most (each holds one stream to the functions service).
MAX_FOLLOWED_PER_REPLICA = 1000
MAX_BACKOFF_SECONDS = 60.0


class PushFollowers(LeasedFollowers[str, PushConfig]):
    """One replica's followers of the push configs it holds the lease of."""

    max_followed = MAX_FOLLOWED_PER_REPLICA
    round_failed = "a2a_push.round_failed"

    def __init__(
        self,
        store: PushStore,
        gateway: Any,
        config: WebhooksOutConfig,
        replica: str,
        stored: Callable[[], None],
    ) -> None:
        super().__init__(config, replica)
        self.store = store
        self.gateway = gateway
        self.stored = stored  # wakes the dispatcher: a delivery is stored

    async def renew(self, lease_seconds: float) -> Collection[str]:
        return await self.store.renew(self.replica, lease_seconds=lease_seconds)

    async def claim(self, lease_seconds: float, limit: int) -> list[PushConfig]:
        return await self.store.claim(self.replica, lease_seconds=lease_seconds, limit=limit)

    async def release(self, key: str) -> None:
        await self.store.release(key, self.replica)

    def key_of(self, row: PushConfig) -> str:
        return row.endpoint_id

    def start(self, row: PushConfig) -> asyncio.Task[None]:
        log.info("a2a_push.following", call_id=row.call_id, config_id=row.config_id)
        return asyncio.create_task(self._follow(row), name=f"a2a-push-{row.endpoint_id}")

    async def _follow(self, config: PushConfig) -> None:
        """Store the task's new states until it ends or the lease is lost."""
        last = [config.last_state]  # the state stored last, kept across a broken stream
        backoff = 1.0
        while True:
            try:
                await self._read(config, last)
                return
            except asyncio.CancelledError:
                raise
            except (errors.NotFound, errors.PermissionDenied) as exc:
                # The call is gone, or no longer the principal's to see: nothing to follow.
                with contextlib.suppress(errors.AgentWorksError):
                    await self.store.error(config, self.replica, exc.message[:300], done=True)
                return
            except errors.AgentWorksError as exc:
                error = exc.message
            except Exception as exc:  # a stream that broke in a way the client did not handle
                log.exception("a2a_push.broken", call_id=config.call_id)
                error = f"{type(exc).__name__}: {exc}"
            log.info("a2a_push.failed", call_id=config.call_id, error=error)
            with contextlib.suppress(errors.AgentWorksError):
                await self.store.error(config, self.replica, error[:300], done=False)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _read(self, config: PushConfig, last: list[str]) -> None:
        client = self.gateway.functions(Identity(principal=config.principal))
        async for status in call_changes(self.gateway, client, config.call_id):
            state = state_of(status)
            if state == last[0]:
                continue
            done = task_view(status).terminal
            delivery = await self._delivery(client, config, status)
            stored = await self.store.advance(
                config,
                self.replica,
                state=state,
                delivery=delivery,
                done=done,
                retry_seconds=self.config.retry_seconds,
            )
            if not stored:
                return  # the lease was lost
            last[0] = state
            self.stored()
            if done:
                return
        if self.gateway.draining.is_set():
            await asyncio.Event().wait()  # draining: the stop cancels this follower

    async def _delivery(
        self, client: Any, config: PushConfig, status: f.CallStatus
    ) -> dict[str, Any]:
        names = small_files(status)
        contents = await asyncio.gather(
            *(client.read_file_bytes(status.call_id, name) for name in names)
        )
        task = call_task(status, dict(zip(names, contents, strict=True)))
        key = f"{status.call_id}:{status.version}"
        return {
            "delivery_id": delivery_id(config.endpoint_id, EVENT_TYPE, key),
            "event_type": EVENT_TYPE,
            "event_key": key,
            "payload": push_body(task),
        }
