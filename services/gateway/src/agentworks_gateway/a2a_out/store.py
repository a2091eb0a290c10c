"""The SQL of A2A outbound (X4): the external tasks followed, by named query."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentworks.server.db import Database
from agentworks_gateway.store import Q, _watched


@dataclass
class FollowedTask:
    """An external agent's task a turn started, followed until it ends."""

    agent: str
    task_id: str
    kind: str  # "conversation" (a2a_send) or "skill" (a2a_call)
    conversation_id: str  # the turn's conversation, where its deliveries go
    target: str  # the crew or workflow whose turn started it
    skill: str = ""
    context_id: str = ""
    state: str = ""
    delivered: list[str] = field(default_factory=list)


def _task(row: Any) -> FollowedTask:
    return FollowedTask(
        agent=row.agent,
        task_id=row.task_id,
        kind=row.kind,
        conversation_id=row.conversation_id,
        target=row.target,
        skill=row.skill,
        context_id=row.context_id,
        state=row.state,
        delivered=list(row.delivered),
    )


class A2AOutStore:
    """The followed tasks of every replica (one table, leases per row)."""

    def __init__(self, database: Database) -> None:
        self.db = database

    async def insert(self, task: FollowedTask) -> None:
        async with _watched("a2a_out.insert"), self.db.raw() as pg:
            await Q.execute(
                pg,
                "a2a_task_insert",
                {
                    "agent": task.agent,
                    "task_id": task.task_id,
                    "kind": task.kind,
                    "skill": task.skill,
                    "conversation_id": task.conversation_id,
                    "target": task.target,
                    "context_id": task.context_id,
                    "state": task.state,
                    "delivered": task.delivered,
                },
            )

    async def claim(self, replica: str, lease_seconds: float, limit: int) -> list[FollowedTask]:
        params = {"replica": replica, "lease_seconds": lease_seconds, "limit": limit}
        async with _watched("a2a_out.claim"), self.db.raw() as pg:
            return [_task(r) for r in await Q.all(pg, "a2a_tasks_claim", params)]

    async def update(
        self, task: FollowedTask, replica: str, *, done: bool, last_error: str = ""
    ) -> None:
        async with _watched("a2a_out.update"), self.db.raw() as pg:
            await Q.execute(
                pg,
                "a2a_task_update",
                {
                    "agent": task.agent,
                    "task_id": task.task_id,
                    "state": task.state,
                    "delivered": task.delivered,
                    "last_error": last_error[:500],
                    "done": done,
                    "replica": replica,
                },
            )
