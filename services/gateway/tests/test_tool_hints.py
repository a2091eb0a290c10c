"""MCP tool annotations are honest per action (V8): hints are per tool, so the
`functions` tool, whose `cancel` ends a call, says it may destroy, and each of its
read-only actions has a read-only tool of its own that a host may run without asking."""

from __future__ import annotations

from agentworks_gateway.mcp_server import tool_definitions


def test_functions_may_destroy_and_its_reads_have_read_only_tools_V8():
    """V8: `functions` is not read-only and may destroy (cancel); its `status` and `read`
    are `get_crew_function_call`, its `list` is `list` what=targets, both read-only and
    idempotent; its description names them; `messages` (send: additive) destroys nothing."""
    tools = {t.name: t for t in tool_definitions()}
    hints = tools["functions"].annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
        False,
        True,
        False,
    )
    for name in ("get_crew_function_call", "list"):
        read = tools[name].annotations
        assert read is not None and read.read_only_hint and read.idempotent_hint, name
        assert not read.destructive_hint and f"{name} (" in (tools["functions"].description or "")
    legacy = tools["get_crew_function_call"].input_schema["properties"]
    assert {"call_id", "wait_seconds", "file", "offset"} <= set(legacy)
    assert "targets" in tools["list"].input_schema["properties"]["what"]["enum"]
    messages = tools["messages"].annotations
    assert messages is not None and messages.destructive_hint is False
