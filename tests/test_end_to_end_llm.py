"""End to end: `make run` with LLM settings runs the reference LLM runtime (L4).

`agentworks up` with AGENTWORKS_LLM_MODEL and OPENAI_BASE_URL (pointing at the scripted
OpenAI-compatible server, the only stand-in) runs `agentworks-runtime llm` for the demo
crew's turns and says so in its banner. Through the real CLI: a message is answered by
the model's send_message; the model calls the demo function `hello` with call_function,
and the completion notice comes back as a later turn, where the model answers again.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from agentworks.server.testing import free_port_block
from agentworks_dev.up import GRPC_SERVICES
from tests.fixtures.scripted_llm import Answer, ScriptedLLM, call, say, serving_in_thread
from tests.test_end_to_end import Up, cli, read_texts

pytestmark = pytest.mark.timeout(150)


def _after_notice(body: dict[str, Any]) -> Answer:
    """The notice turn: the model is sent the function_completed delivery."""
    last = body["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith("[function_completed]")
    return call("send_message", text="hello has ended")


def test_make_run_with_llm_settings_answers_the_demo_crew_with_the_llm_runtime_L4(
    tmp_path: pathlib.Path,
):
    """L4/R2/C6/F13: with LLM settings, `agentworks up` starts the reference LLM runtime
    for crew:demo (the banner names the model and endpoint); a message sent with the CLI
    gets the replies the model sent with send_message, and the function it called with
    call_function comes back as a later turn of the same conversation."""
    llm = ScriptedLLM(
        [
            call("call_function", target="crew:demo", function="hello", inputs={"name": "Ada"}),
            call("send_message", text="calling hello for you"),
            say("turn over"),
            _after_notice,
            say("turn over"),
        ]
    )
    base_port = free_port_block(len(GRPC_SERVICES) + 1)
    with serving_in_thread(llm):
        up = Up(
            tmp_path,
            base_port,
            base_port + len(GRPC_SERVICES),
            AGENTWORKS_LLM_MODEL="scripted-model",
            OPENAI_BASE_URL=llm.base_url,
        )
        try:
            up.wait_ready()
            assert up.count(
                "agent", f"reference LLM runtime: model scripted-model at {llm.base_url}"
            )
            up.wait_for("demo-runtime", "worker.started")
            receipt = cli(tmp_path, "messages", "send", "--crew", "demo", "say hello to Ada")
            texts = read_texts(tmp_path, receipt["inbox_id"], 2)
        finally:
            code = up.stop()
    assert texts == ["calling hello for you", "hello has ended"], up.output
    assert code == 0, up.output
    first = llm.requests[0]
    assert first["model"] == "scripted-model"
    assert first["messages"][-1]["content"] == "[message from user:dev]\nsay hello to Ada"
    # The call_function tool's receipt was fed back to the model.
    receipt_fed = json.loads(llm.requests[1]["messages"][-1]["content"])
    assert receipt_fed["call_id"]
