"""The demo crew's functions, used by `make run` (R2).

`crew:demo` declares three functions, each run by `HANDLERS` in an `ExecutionWorker`:

- `hello`: a plain function; its final message is the answer.
- `word_count`: has an output schema; writes its result JSON to FUNCTION_RESULT_FILE and a
  `words.txt` file next to it (F10).
- `confirm`: asks the caller a human-input question and answers with the reply (F11).

    await declare_demo_functions(owner_client)           # as the owner of crew:demo
    await serve_executions(config, HANDLERS, root=...)   # as agent:demo/demo-bot
"""

from __future__ import annotations

import asyncio
import collections
import re
from typing import Any

from agentworks.client.functions import FunctionsClient
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.executions import ExecutionContext, ExecutionHandler

PRINCIPAL = "agent:demo/demo-bot"
TARGETS = ("crew:demo",)
TARGET = "crew:demo"
# Who may call the demo functions: every signed-in user, agent and workflow.
ALLOWED_CALLERS = ("user:*", "agent:*", "workflow:*")

HELLO_INPUT = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100}},
    "required": ["name"],
    "additionalProperties": False,
}
WORD_COUNT_INPUT = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 100000}},
    "required": ["text"],
    "additionalProperties": False,
}
WORD_COUNT_OUTPUT = {
    "type": "object",
    "properties": {
        "words": {"type": "integer", "minimum": 0},
        "characters": {"type": "integer", "minimum": 0},
        "top": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    },
    "required": ["words", "characters", "top"],
    "additionalProperties": False,
}
CONFIRM_INPUT = {
    "type": "object",
    "properties": {"action": {"type": "string", "minLength": 1, "maxLength": 500}},
    "required": ["action"],
    "additionalProperties": False,
}


async def hello(ctx: ExecutionContext) -> str:
    """Greets `name`."""
    await ctx.progress("greeting")
    return f"Hello, {ctx.inputs['name']}!"


async def word_count(ctx: ExecutionContext) -> str:
    """Counts words; the result goes to FUNCTION_RESULT_FILE, the word list to words.txt."""
    text = ctx.inputs["text"]
    words = re.findall(r"[\w']+", text.lower())
    await ctx.progress(f"counted {len(words)} words")
    top = [w for w, _ in collections.Counter(words).most_common(5)]
    await asyncio.to_thread((ctx.output_dir / "words.txt").write_text, "\n".join(words) + "\n")
    await ctx.upload_file("words.txt")
    ctx.write_result({"words": len(words), "characters": len(text), "top": top})
    return f"{len(words)} words, {len(text)} characters"


async def confirm(ctx: ExecutionContext) -> str:
    """Asks whether to go ahead with `action`, and says what the caller answered."""
    action = ctx.inputs["action"]
    await ctx.progress("waiting for a confirmation")
    reply = await ctx.ask(f"Should I go ahead with: {action}? (yes/no)")
    await ctx.message(f"the caller answered: {reply}")
    if reply.strip().lower() in ("y", "yes", "ok", "sure"):
        return f"Confirmed: {action}"
    return f"Not confirmed ({reply.strip()}): {action}"


HANDLERS: dict[str, ExecutionHandler] = {
    "hello": hello,
    "word_count": word_count,
    "confirm": confirm,
}

DECLARATIONS: list[dict[str, Any]] = [
    {
        "name": "hello",
        "description": "Greets someone by name. A plain function: the answer is its message.",
        "input_schema": HELLO_INPUT,
    },
    {
        "name": "word_count",
        "description": "Counts the words of a text; returns {words, characters, top}.",
        "input_schema": WORD_COUNT_INPUT,
        "output_schema": WORD_COUNT_OUTPUT,
    },
    {
        "name": "confirm",
        "description": "Asks the caller to confirm an action (human input), then answers.",
        "input_schema": CONFIRM_INPUT,
    },
]


async def declare_demo_functions(client: FunctionsClient, target: str = TARGET) -> list[f.Function]:
    """Declare (or update) the demo functions; `client` must act as the target's owner."""
    declared = []
    for spec in DECLARATIONS:
        declared.append(
            await client.declare_function(
                target,
                spec["name"],
                description=spec["description"],
                input_schema=spec["input_schema"],
                output_schema=spec.get("output_schema"),
                allowed_callers=ALLOWED_CALLERS,
            )
        )
    return declared
