"""Following open external tasks until they end (X4): this replica claims the stored
tasks nobody follows (a lease per row, so two replicas never follow one and a replica's
restart or death hands its tasks on), asks each agent for its task, and puts the news
into the turn's conversation: each new agent message as `conversation_reply`, a skill
call's end as `function_completed`. Polling with GetTask, not a stream: it needs no
connection to survive a restart, and an agent need not stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import structlog

from agentworks.core import errors
from agentworks_gateway.a2a_out import peer
from agentworks_gateway.a2a_out.service import SKILL, Conversations
from agentworks_gateway.a2a_out.store import FollowedTask

log = structlog.get_logger("agentworks.gateway.a2a_out")

BATCH = 50


class Follower:
    """The loop following open tasks in one gateway process."""

    def __init__(self, conversations: Conversations) -> None:
        self.conversations = conversations
        self.store = conversations.store
        self.config = conversations.config
        self.replica = f"gateway-{uuid.uuid4().hex[:12]}"
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="a2a-out-follower")

    def wake(self) -> None:
        """A new task was stored: look now, not at the next poll."""
        self._woken.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.follow_once()
            except asyncio.CancelledError:
                raise
            except errors.AgentWorksError as exc:
                log.warning("a2a_out.follow_failed", error=exc.message)
            except Exception:
                log.exception("a2a_out.follow_failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.config.poll_seconds)
            self._woken.clear()

    async def follow_once(self) -> int:
        """Ask about each open task this replica may follow now; how many it asked about."""
        tasks = await self.store.claim(self.replica, self.config.lease_seconds, BATCH)
        for task in tasks:
            await self._follow(task)
        return len(tasks)

    async def _follow(self, task: FollowedTask) -> None:
        agent = self.config.agents.get(task.agent)
        if agent is None:  # the operator took it off the allow-list: stop following
            await self.store.update(task, self.replica, done=True, last_error="not allowed")
            return
        try:
            async with peer.connect(
                agent, self.conversations.policy, self.config.timeout_seconds
            ) as remote:
                found = await remote.task(task.task_id)
        except errors.AgentWorksError as exc:
            await self.store.update(task, self.replica, done=False, last_error=exc.message)
            return
        done = found.status.state in peer.ENDED
        error = ""
        try:
            for message in peer.agent_messages(found):
                if message.message_id in task.delivered:
                    continue
                last = message.message_id == found.status.message.message_id
                if task.kind != SKILL or not done or not last:
                    await self.conversations.deliver_reply(task, message)
                task.delivered.append(message.message_id)
            if done and task.kind == SKILL:
                await self.conversations.deliver_end(task, found)
        except errors.PreconditionFailed as exc:
            # C8 turned off since: the reply is refused, as any would be; stop following.
            error, done = exc.message, True
            log.info("a2a_out.reply_refused", agent=task.agent, task_id=task.task_id)
        task.state = peer.state_name(found.status.state)
        await self.store.update(task, self.replica, done=done, last_error=error)
        if done:
            log.info("a2a_out.task_ended", agent=task.agent, task_id=task.task_id, state=task.state)
