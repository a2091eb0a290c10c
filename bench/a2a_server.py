"""The agent-protocol peer of the conversation round trip: an a2a-sdk agent over HTTP.

`python -m bench.a2a_server` serves, on A2A_LISTEN (host:port), one agent through
a2a-sdk's JSON-RPC binding with its PostgreSQL task store (`DatabaseTaskStore` on
A2A_DATABASE_URL): each message creates a task, the agent answers with a reply message
and completes the task, the task (with its history and the reply) is stored, and the
reply is returned in the HTTP answer. It is installed for the benchmark only
(`make bench` does it), like procrastinate.
"""

from __future__ import annotations

import os

import uvicorn
from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import DatabaseTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette

RPC_PATH = "/a2a"


class ReplyAgent(AgentExecutor):
    """Answers every message with one reply and completes its task (like the runtime)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        await updater.complete(updater.new_agent_message([new_text_part("benchmark reply")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def card(url: str) -> AgentCard:
    return AgentCard(
        name="bench",
        description="benchmark agent",
        version="1.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url + RPC_PATH)
        ],
        skills=[AgentSkill(id="reply", name="reply", description="replies once", tags=["bench"])],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


def app(database_url: str, url: str) -> Starlette:
    engine = create_async_engine(database_url, pool_size=10, max_overflow=40)
    handler = DefaultRequestHandler(
        agent_executor=ReplyAgent(), task_store=DatabaseTaskStore(engine), agent_card=card(url)
    )
    routes = create_agent_card_routes(card(url)) + create_jsonrpc_routes(handler, RPC_PATH)
    return Starlette(routes=routes)


def main() -> None:
    host, _, port = os.environ["A2A_LISTEN"].rpartition(":")
    served = app(os.environ["A2A_DATABASE_URL"], f"http://{host}:{port}")
    uvicorn.run(served, host=host, port=int(port), log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
