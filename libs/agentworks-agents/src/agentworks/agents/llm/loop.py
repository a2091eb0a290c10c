"""The OpenAI tool-calling loop of the reference LLM runtime (L3, L4).

One `run_chat` asks the model with the chat so far and the toolbox's tools (in the
OpenAI shape), runs the tools it calls (`dispatch_openai`), feeds their results back as
`tool` messages, and asks again, until the model answers without a tool call: that
answer is returned, and the chat keeps everything, so a caller can append to it and go
on (the correction turn, F10). The loop is bounded: after `max_tool_rounds` answers with
tool calls, one more is a `ToolRoundsExhausted` error.

What is recorded of the loop (`Recorder`) is the tools' names and the model's text, never
a tool's arguments or its result (F7, L4): those stay in the chat sent to the model.
Timeouts and retries (429, 5xx, lost connections, with backoff and the server's
Retry-After) are the openai client's own (`timeout`, `max_retries`).
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol, cast

import openai
from openai.types.chat import ChatCompletionMessageParam

from agentworks.agents.agent_tools import Toolbox
from agentworks.agents.agent_tools.shapes import dispatch_openai, openai_tools
from agentworks.agents.llm.config import LlmConfig

Chat = list[dict[str, Any]]


class ToolRoundsExhausted(RuntimeError):
    """The model kept calling tools past the runtime's bound."""


class ModelUnavailable(RuntimeError):
    """The model endpoint failed (after the client's retries) or refused the request."""


class Recorder(Protocol):
    """Where the loop says what it does: tool names and the model's text only."""

    async def assistant_text(self, text: str) -> None: ...

    async def tool_call(self, name: str) -> None: ...

    async def tool_result(self, name: str) -> None: ...

    async def error(self, text: str) -> None: ...


def make_client(config: LlmConfig) -> openai.AsyncOpenAI:
    """The openai client for `config`: its endpoint, key, timeout and retries."""
    return openai.AsyncOpenAI(
        base_url=config.base_url,
        api_key=config.api_key,
        timeout=config.timeout_seconds,
        max_retries=config.max_retries,
    )


def _assistant_message(message: Any) -> dict[str, Any]:
    """The model's answer as it goes back into the chat (no SDK-only fields)."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return entry


async def _ask(client: openai.AsyncOpenAI, config: LlmConfig, chat: Chat, tools: list) -> Any:
    """One chat completion; the endpoint's failure as ModelUnavailable, saying where."""
    options: dict[str, Any] = {}
    if tools:
        options["tools"] = tools
    if config.temperature is not None:
        options["temperature"] = config.temperature
    try:
        response = await client.chat.completions.create(
            model=config.model,
            messages=cast(list[ChatCompletionMessageParam], chat),
            **options,
        )
    except openai.APIStatusError as exc:
        raise ModelUnavailable(
            f"the model endpoint {config.base_url} answered {exc.status_code} for model "
            f"{config.model!r}: {exc.message}"
        ) from None
    except openai.APIError as exc:  # connection failures and timeouts, after the retries
        raise ModelUnavailable(
            f"the model endpoint {config.base_url} could not be reached: {exc.message}"
        ) from None
    if not response.choices:
        raise ModelUnavailable(f"the model endpoint {config.base_url} answered no choice")
    return response.choices[0].message


async def run_chat(
    client: openai.AsyncOpenAI,
    config: LlmConfig,
    chat: Chat,
    toolbox: Toolbox,
    recorder: Recorder,
) -> str:
    """Run the tool-calling loop on `chat` (extended in place); the model's final text."""
    tools = openai_tools(toolbox)
    for rounds in itertools.count():
        try:
            message = await _ask(client, config, chat, tools)
        except ModelUnavailable as exc:
            await recorder.error(str(exc))
            raise
        if not message.tool_calls:
            chat.append(_assistant_message(message))
            return message.content or ""
        if rounds >= config.max_tool_rounds:
            why = (
                f"the model asked for tools {rounds + 1} times without finishing; stopped "
                f"after {config.max_tool_rounds} tool rounds (AGENTWORKS_LLM_MAX_TOOL_ROUNDS)"
            )
            await recorder.error(why)
            raise ToolRoundsExhausted(why)
        chat.append(_assistant_message(message))
        if message.content:
            await recorder.assistant_text(message.content)
        for call in message.tool_calls:
            name = call.function.name
            await recorder.tool_call(name)
            chat.append(await dispatch_openai(toolbox, call))
            await recorder.tool_result(name)
    raise AssertionError("unreachable")
