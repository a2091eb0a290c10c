"""docs/a2a.md's a2a-sdk session runs as written and returns what the page says (X3,
X5): its Python block is executed against a gateway whose crew:demo has `echo` and a
runtime that finishes the call and answers the conversation twice."""

from __future__ import annotations

import asyncio
import json
import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "a2a.md"


def doc_blocks() -> tuple[str, list[str]]:
    text = DOC.read_text()
    (code,) = re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)
    (said,) = re.findall(r"^It returns:\n\n```text\n(.*?)^```$", text, re.M | re.S)
    return code, said.splitlines()


async def test_the_a2a_doc_session_runs_as_written_X3_X5(
    gateway, alice_token, demo, echo, runtime, bot
):
    """X3 X5: the page's session, as written, sees what the page says it sees."""
    code, expected = doc_blocks()
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)

    async def answer() -> None:
        execution = await runtime.claim_execution([demo], wait_seconds=20)
        assert execution is not None
        text = json.loads(execution.inputs_json)["text"]
        await runtime.finish_execution(execution.call_id, final_message=f"echo: {text}")
        turn = await bot.claim_turn([demo], wait_seconds=20)
        assert turn is not None
        await bot.send_message(turn.reply_inbox_id, "one moment")
        await bot.send_message(turn.reply_inbox_id, "here it is", complete_turn_id=turn.turn_id)

    answering = asyncio.create_task(answer())
    async with asyncio.timeout(60):
        seen = await namespace["session"](gateway.url, alice_token)
    await answering
    assert seen == expected
