"""The reference LLM runtime (L4): a crew's turns and executions answered by a model on
any OpenAI-compatible endpoint, through the agent tool set (L1, L3).

`agentworks-runtime llm` runs it; `LlmConfig` says which settings it reads (the openai
client's OPENAI_BASE_URL / OPENAI_API_KEY, and AGENTWORKS_LLM_MODEL).
"""

from agentworks.agents.llm.agent import LlmAgent, parse_result
from agentworks.agents.llm.config import LlmConfig, llm_settings_given
from agentworks.agents.llm.loop import ModelUnavailable, ToolRoundsExhausted, run_chat
from agentworks.agents.llm.serve import llm_workers, serve_llm

__all__ = [
    "LlmAgent",
    "LlmConfig",
    "ModelUnavailable",
    "ToolRoundsExhausted",
    "llm_settings_given",
    "llm_workers",
    "parse_result",
    "run_chat",
    "serve_llm",
]
