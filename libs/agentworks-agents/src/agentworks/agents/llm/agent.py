"""The reference LLM agent: turns and executions answered by an OpenAI-compatible model (L4).

    agent = LlmAgent(LlmConfig.from_env())
    TurnWorker(..., handler=agent.handle_turn)
    ExecutionWorker(..., handler=agent.handle_execution, on_finished=agent.forget)

A turn: the conversation's memory is its transcript (`memory.conversation_memory`), the
tools are the turn's (`turn_toolbox`: send_message, wake-ups, functions, ...). The model
replies only by calling send_message (C6); its final text is logged and dropped.

An execution: a fresh chat per call (F4) with the execution's tools (`execution_toolbox`).
Without an output schema the model's final text is the answer. With one, the final text
is parsed as JSON (a ```json fence around it is allowed) and written to
FUNCTION_RESULT_FILE (`ctx.write_result`); the platform validates it (F10). The chat is
kept until the execution ends: when the platform asks for the one correction turn, the
worker calls the handler again, and the platform's correction message is appended to
that same chat, so the model sees what it answered and why it was refused.

Tool use is recorded as execution events `tool_call` / `tool_result` with the tool's
name only, and the model's intermediate text as `assistant` events (F7); in a turn, as
log lines with the tool's name.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from agentworks.agents.agent_tools import execution_toolbox, turn_toolbox
from agentworks.agents.llm.config import LlmConfig
from agentworks.agents.llm.loop import Chat, make_client, run_chat
from agentworks.agents.llm.memory import conversation_memory
from agentworks.core.limits import MAX_EVENT_TEXT_BYTES
from agentworks.runtime.execution_context import ExecutionContext, ExecutionOutcome
from agentworks.runtime.reporting import fit_text
from agentworks.runtime.turn_context import TurnContext

# Kept per running execution for its correction turn; beyond this many, the oldest go
# (a worker that never reports an end cannot grow without bound).
MAX_KEPT_CHATS = 1000

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)

TURN_PROMPT = """\
You are the agent of {target} in a conversation. Each message and event of the \
conversation comes to you as a user message; the ones after the last thing you said are \
new in this turn. Your earlier assistant messages are the messages you sent.

Plain text you write reaches no one. To answer, call send_message: it goes to the \
conversation's trusted reply address. You decide what to send: one message, several, or \
none. You can also ask for a wake-up to check back later, call functions of other crews, \
and read the transcript. When you are done, answer without calling a tool; that ends \
your turn."""

EXECUTION_PROMPT = """\
You are running one call of the function {function!r} of {target}, made by {caller}. \
This call has its own chat; nothing is shared with other calls. Use the tools to report \
progress, post messages, ask a human when you need an answer, and call other functions. \
{ending}"""

ENDING_ANSWER = "When the work is done, answer with the function's final answer as plain text."

ENDING_SCHEMA = """\
When the work is done, answer with ONLY the result: one JSON value valid for this JSON \
Schema, no other text. The runtime writes it to the call's result file \
(FUNCTION_RESULT_FILE) for you; there is no tool for returning it.
Output schema: {schema}"""


# Said after the platform's correction message, which asks for the file to be written.
CORRECTION_NOTE = (
    "\n\nAnswer with the corrected JSON only: the runtime writes your answer to "
    "FUNCTION_RESULT_FILE."
)


def parse_result(text: str) -> tuple[bool, Any]:
    """The model's final text as JSON (a ```json fence allowed); (False, None) if not."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


class _ExecutionRecorder:
    """Records an execution's tool use as events, names only (F7, L4)."""

    def __init__(self, ctx: ExecutionContext) -> None:
        self.ctx = ctx

    async def assistant_text(self, text: str) -> None:
        await self.ctx.event("assistant", fit_text(text, MAX_EVENT_TEXT_BYTES))

    async def tool_call(self, name: str) -> None:
        await self.ctx.event("tool_call", tool_name=name)

    async def tool_result(self, name: str) -> None:
        await self.ctx.event("tool_result", tool_name=name)

    async def error(self, text: str) -> None:
        await self.ctx.event("error", fit_text(text, MAX_EVENT_TEXT_BYTES))


class _TurnRecorder:
    """Logs a turn's tool use, names only: messaging keeps no events for turns."""

    def __init__(self, ctx: TurnContext) -> None:
        self.log = ctx.log

    async def assistant_text(self, text: str) -> None:
        self.log.info("llm.text", chars=len(text))

    async def tool_call(self, name: str) -> None:
        self.log.info("llm.tool_call", tool_name=name)

    async def tool_result(self, name: str) -> None:
        self.log.info("llm.tool_result", tool_name=name)

    async def error(self, text: str) -> None:
        self.log.error("llm.error", error=text)


class LlmAgent:
    """Turn and execution handlers that ask an OpenAI-compatible model (L4)."""

    def __init__(self, config: LlmConfig, *, client: openai.AsyncOpenAI | None = None) -> None:
        self.config = config
        self.client = client or make_client(config)
        self._chats: dict[str, Chat] = {}  # call_id -> the execution's chat, until it ends

    def _system(self, text: str) -> dict[str, Any]:
        if self.config.instructions:
            text = f"{text}\n\n{self.config.instructions}"
        return {"role": "system", "content": text}

    async def handle_turn(self, ctx: TurnContext) -> None:
        """Serve one turn: memory from the transcript, replies through send_message."""
        chat = [self._system(TURN_PROMPT.format(target=ctx.target))]
        chat += await conversation_memory(ctx, self.config.history_entries)
        final = await run_chat(
            self.client, self.config, chat, turn_toolbox(ctx), _TurnRecorder(ctx)
        )
        # C6: the final text is not a reply; only send_message reaches the conversation.
        ctx.log.info("llm.turn_done", final_chars=len(final), replies=len(ctx.sent))

    async def handle_execution(self, ctx: ExecutionContext) -> str:
        """Serve one execution, or its correction turn in the same chat (F10)."""
        chat = self._chats.get(ctx.call_id) if ctx.is_correction else None
        if chat is None:
            chat = self._new_chat(ctx)
            self._keep(ctx.call_id, chat)
        if ctx.is_correction:
            chat.append({"role": "user", "content": ctx.correction_prompt + CORRECTION_NOTE})
        final = await run_chat(
            self.client, self.config, chat, execution_toolbox(ctx), _ExecutionRecorder(ctx)
        )
        if ctx.output_schema is not None:
            parsed, value = parse_result(final)
            if parsed:
                ctx.write_result(value)
            else:
                ctx.result_file.unlink(missing_ok=True)  # an earlier round's is stale
                await ctx.event("error", "the model's answer is not JSON; no result written")
        return final

    def _new_chat(self, ctx: ExecutionContext) -> Chat:
        schema = ctx.output_schema
        ending = (
            ENDING_ANSWER
            if schema is None
            else ENDING_SCHEMA.format(schema=json.dumps(schema, sort_keys=True))
        )
        system = EXECUTION_PROMPT.format(
            function=ctx.function, target=ctx.target, caller=ctx.caller or "a caller", ending=ending
        )
        inputs = json.dumps(ctx.inputs, sort_keys=True)
        return [self._system(system), {"role": "user", "content": f"Inputs: {inputs}"}]

    def _keep(self, call_id: str, chat: Chat) -> None:
        self._chats[call_id] = chat
        while len(self._chats) > MAX_KEPT_CHATS:
            self._chats.pop(next(iter(self._chats)))

    def forget(self, outcome: ExecutionOutcome) -> None:
        """Drop an ended execution's chat (the ExecutionWorker's `on_finished`)."""
        self._chats.pop(outcome.call_id, None)

    async def close(self) -> None:
        """Close the model client's connections."""
        await self.client.close()
