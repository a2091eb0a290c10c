"""The reference LLM runtime's settings, read once from the environment (L4).

The endpoint and key are the `openai` client's own variables, so a shell that already
talks to an OpenAI-compatible server needs nothing new but the model:

    OPENAI_BASE_URL        the endpoint, e.g. http://localhost:11434/v1 (Ollama); default
                           the openai client's (https://api.openai.com/v1)
    OPENAI_API_KEY         the key; local servers ignore it, so it may be left unset there
    AGENTWORKS_LLM_MODEL   the model to ask, e.g. llama3.2 or gpt-4o-mini (required)

and, each with a default:

    AGENTWORKS_LLM_MAX_TOOL_ROUNDS    model answers with tool calls per turn or execution
                                      round before the runtime stops it (8, 1-100)
    AGENTWORKS_LLM_TIMEOUT_SECONDS    one model request (120, 1-3600)
    AGENTWORKS_LLM_MAX_RETRIES        retries of a request answered 408/409/429/5xx or not
                                      answered, with the client's backoff (2, 0-10)
    AGENTWORKS_LLM_HISTORY_ENTRIES    transcript entries a turn's memory keeps, the newest
                                      (200, 1-10000)
    AGENTWORKS_LLM_TEMPERATURE        sampling temperature (unset: the server's default)
    AGENTWORKS_LLM_INSTRUCTIONS       text added to the system prompt (the agent's role)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.core.settings import Env

MODEL_VARIABLE = "AGENTWORKS_LLM_MODEL"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local OpenAI-compatible servers (Ollama, llama.cpp, vLLM) take any key, but the openai
# client refuses to start without one.
KEYLESS = "unused"


@dataclass(frozen=True)
class LlmConfig:
    """Which OpenAI-compatible endpoint and model the runtime asks, and its bounds."""

    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str = dataclasses.field(default=KEYLESS, repr=False)
    max_tool_rounds: int = 8
    timeout_seconds: float = 120.0
    max_retries: int = 2
    history_entries: int = 200
    temperature: float | None = None
    instructions: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LlmConfig:
        """Build the settings; ValueError naming the variable when one is unusable."""
        environ = dict(os.environ if environ is None else environ)
        env = Env("AGENTWORKS", environ)
        openai = Env("OPENAI", environ)
        model = env.get_str("LLM_MODEL").strip()
        if not model:
            raise ValueError(
                f"{MODEL_VARIABLE} is not set: name the model to ask, e.g. llama3.2 "
                f"(with {BASE_URL_VARIABLE}=http://localhost:11434/v1 for Ollama)"
            )
        temperature = env.get_float("LLM_TEMPERATURE", -1.0, minimum=0.0, maximum=2.0)
        base_url = openai.get_str("BASE_URL", DEFAULT_BASE_URL).strip()
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"{BASE_URL_VARIABLE} must be an http(s) URL such as "
                f"http://localhost:11434/v1, got {base_url!r}"
            )
        return cls(
            model=model,
            base_url=base_url.rstrip("/"),
            api_key=openai.get_str("API_KEY", KEYLESS),
            max_tool_rounds=env.get_int("LLM_MAX_TOOL_ROUNDS", 8, minimum=1, maximum=100),
            timeout_seconds=env.get_float("LLM_TIMEOUT_SECONDS", 120.0, minimum=1, maximum=3600),
            max_retries=env.get_int("LLM_MAX_RETRIES", 2, minimum=0, maximum=10),
            history_entries=env.get_int("LLM_HISTORY_ENTRIES", 200, minimum=1, maximum=10000),
            temperature=None if temperature < 0 else temperature,
            instructions=env.get_str("LLM_INSTRUCTIONS"),
        )


def llm_settings_given(environ: Mapping[str, str]) -> bool:
    """Whether `environ` asks for the LLM runtime: AGENTWORKS_LLM_MODEL is set."""
    return bool(environ.get(MODEL_VARIABLE, "").strip())
