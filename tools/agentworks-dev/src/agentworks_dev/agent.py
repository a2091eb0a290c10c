"""Which agent `agentworks up` runs for the demo crew's turns (L4).

With the LLM settings given (AGENTWORKS_LLM_MODEL; the endpoint and key are the openai
client's OPENAI_BASE_URL and OPENAI_API_KEY), the reference LLM runtime
(`agentworks-runtime llm --serve turns`): a model answers crew:demo's conversations
through the agent tools, and can call the demo functions. Without them, the scripted
demo (`agentworks-runtime demo`). The demo functions stay scripted either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentworks_dev.specs import StartupError

LLM_MODEL = "AGENTWORKS_LLM_MODEL"
# The model endpoint's key: the runtimes' only; `up` gives it to no service.
LLM_KEY = "OPENAI_API_KEY"


def llm_wanted(environ: Mapping[str, str]) -> bool:
    """Whether the LLM settings are given (AGENTWORKS_LLM_MODEL is set)."""
    return bool(environ.get(LLM_MODEL, "").strip())


def demo_agent_command(environ: Mapping[str, str]) -> list[str]:
    """The `agentworks-runtime` arguments of the demo crew's turn runtime. StartupError
    when LLM settings are given but unusable (before anything starts)."""
    if not llm_wanted(environ):
        return ["demo"]
    from agentworks.agents.llm.config import LlmConfig

    try:
        LlmConfig.from_env(environ)
    except ValueError as exc:
        raise StartupError(f"the demo crew's LLM agent cannot start: {exc}") from None
    return ["llm", "--serve", "turns"]


def demo_agent_line(environ: Mapping[str, str]) -> str:
    """What the banner says of the demo crew's agent."""
    if not llm_wanted(environ):
        return "scripted demo (for a model: AGENTWORKS_LLM_MODEL and OPENAI_BASE_URL, README)"
    from agentworks.agents.llm.config import LlmConfig

    config = LlmConfig.from_env(environ)
    return f"reference LLM runtime: model {config.model} at {config.base_url}"
