"""A call end to end: call, claim, report, upload, finish, status, read."""

import json

from agentworks.client.functions import call_result, state_name


async def test_call_claim_report_finish_status_F4_F7_F8_R1(clients, echo, runtime, summarize):
    """F4 F7 F8 R1: a call runs as a claimed execution whose record the caller reads."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", "summarize", {"text": "hello world"})
    assert receipt.created and state_name(receipt.status) == "running"
    assert receipt.output_folder == f".calls/{receipt.call_id}/"

    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution is not None and execution.call_id == receipt.call_id
    assert execution.result_file == "result.json" and json.loads(execution.output_schema_json)
    assert json.loads(execution.inputs_json) == {"text": "hello world"}

    await runtime.report(execution.call_id, progress="half", messages=["thinking"], sequence=1)
    await runtime.upload_file(execution.call_id, "result.json", b'{"summary": "hello", "words": 2}')
    done = await runtime.finish_execution(execution.call_id, final_message="done")
    assert state_name(done.status) == "completed" and not done.correction_requested

    status = await alice.get_status(receipt.call_id)
    assert state_name(status.status) == "completed"
    assert status.answer == "done" and status.progress == "half"
    assert call_result(status) == {"summary": "hello", "words": 2}
    assert [m.text for m in status.messages] == ["thinking"]
    assert [f.name for f in status.files] == ["result.json"]
    page = await alice.read_file(receipt.call_id, "result.json")
    assert page.content == '{"summary": "hello", "words": 2}'
    assert not page.HasField("next_offset")
