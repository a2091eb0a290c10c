"""`agentworks-runtime llm`: serve a crew's turns and executions with the LLM agent (L4)."""

from __future__ import annotations

from collections.abc import Sequence

from agentworks.agents.llm.agent import LlmAgent
from agentworks.agents.llm.config import LlmConfig
from agentworks.core.logging import get_logger
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.executions import execution_worker
from agentworks.runtime.serving import Worker, run_until_signal
from agentworks.runtime.turns import TurnWorker

SERVES = ("turns", "executions")


def llm_workers(
    config: RuntimeConfig, agent: LlmAgent, serves: Sequence[str] = SERVES
) -> list[Worker]:
    """The workers that serve `config.targets` with `agent`: turns, executions or both."""
    workers: list[Worker] = []
    if "turns" in serves:
        workers.append(
            TurnWorker(
                config.messaging_address,
                config.minter(),
                config.targets,
                agent.handle_turn,
                scheduler_address=config.scheduler_address or None,
                functions_address=config.functions_address or None,
                wait_seconds=config.wait_seconds,
                lease_seconds=config.lease_seconds,
                concurrency=config.turn_concurrency,
                turn_seconds=config.turn_seconds,
                health_file=config.health_file,
                tls=config.tls,
            )
        )
    if "executions" in serves:
        worker = execution_worker(config, agent.handle_execution)
        worker.on_finished = agent.forget
        workers.append(worker)
    return workers


async def serve_llm(config: RuntimeConfig, llm: LlmConfig, serves: Sequence[str] = SERVES) -> int:
    """Run the LLM agent's workers until SIGTERM/SIGINT; the process exit code."""
    agent = LlmAgent(llm)
    get_logger(__name__).info(
        "llm.ready", model=llm.model, base_url=llm.base_url, serves=",".join(serves)
    )
    try:
        return await run_until_signal(
            *llm_workers(config, agent, serves), drain_seconds=config.drain_seconds
        )
    finally:
        await agent.close()
