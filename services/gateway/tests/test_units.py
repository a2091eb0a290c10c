"""Parts of the gateway that need no network: tokens, schemas, config, docs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from agentworks.core.errors import InvalidArgument, NotFound, PreconditionFailed
from agentworks_gateway import tools
from agentworks_gateway.config import LOCAL_HOSTS, Config
from agentworks_gateway.tokens import ensure_token, hash_token, new_token

REPO = Path(__file__).resolve().parents[3]


def test_tokens_are_random_prefixed_and_stored_as_sha256_A1():
    """A1: `aw_` + 256 random bits; the stored form is the SHA-256 hex digest."""
    a, b = new_token(), new_token()
    assert a != b and a.startswith("aw_") and len(a) == 46
    assert len(hash_token(a)) == 64 and hash_token(a) != hash_token(b)


async def test_ensure_token_is_idempotent_and_refuses_a_revoked_token_A1(database_url):
    """A1: the supervisor's helper stores only a hash, converges, and never un-revokes."""
    token = new_token()
    for label in ("dev", "dev (again)"):
        await asyncio.to_thread(ensure_token, database_url, token, "user:dev", {"operator"}, label)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT token_hash, principal, roles, label FROM gateway.api_tokens"
        ).fetchall()
        assert rows == [(hash_token(token), "user:dev", ["operator"], "dev (again)")]
        assert token not in repr(conn.execute("SELECT * FROM gateway.api_tokens").fetchall())
        conn.execute("UPDATE gateway.api_tokens SET revoked_at = now()")
    with pytest.raises(PreconditionFailed, match="this token was revoked"):
        await asyncio.to_thread(ensure_token, database_url, token, "user:dev", set(), "dev")
    with pytest.raises(InvalidArgument, match="unknown role"):
        await asyncio.to_thread(ensure_token, database_url, new_token(), "user:x", {"admin"}, "")
    with pytest.raises(InvalidArgument, match="must start with 'aw_'"):
        await asyncio.to_thread(ensure_token, database_url, "secret", "user:x", set(), "")


def test_every_tool_schema_is_valid_json_schema_and_operator_tools_stay_off_mcp_G2():
    """G2: each tool publishes a 2020-12 schema; operator and owner tools are /api only."""
    assert [t.name for t in tools.mcp_tools()] == [
        "messages",
        "ask_crew",
        "chat",
        "functions",
        "get_crew_function_call",
        "list",
        "transcript",
    ]
    for tool in tools.TOOLS.values():
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    with pytest.raises(NotFound, match="the tools are messages, ask_crew, chat, functions, get_"):
        tools.find_tool("tokens", mcp=True)
    for name in ("tokens", "targets", "declarations", "wake_ups", "schedules", "pauses"):
        assert tools.find_tool(name, mcp=False).name == name
        with pytest.raises(NotFound):
            tools.find_tool(name, mcp=True)


def test_argument_errors_list_every_violation_at_once_G2_P6():
    """G2 P6: one refusal names every fault, so a client can fix them all in one go."""
    tool = tools.find_tool("messages", mcp=True)
    with pytest.raises(InvalidArgument) as caught:
        tools.check_arguments(tool, {"action": "peek", "limit": "ten", "extra": True})
    assert caught.value.message == (
        "invalid arguments for messages: Additional properties are not allowed ('extra' was "
        "unexpected); action: 'peek' is not one of ['send', 'read']; limit: 'ten' is not of "
        "type 'integer'"
    )
    with pytest.raises(InvalidArgument, match="must be a JSON object, got list"):
        tools.check_arguments(tool, [1])


def test_config_reads_gateway_variables_with_fallbacks():
    """Config: GATEWAY_* first, DATABASE_URL as fallback, localhost-only MCP by default."""
    config = Config.from_env(
        {
            "DATABASE_URL": "postgresql://db/x",
            "GATEWAY_MESSAGING_ADDRESS": "127.0.0.1:1,127.0.0.1:2",
        }
    )
    assert config.database_url == "postgresql://db/x"
    assert config.host_port == ("127.0.0.1", 8080)
    assert config.messaging_address == "127.0.0.1:1,127.0.0.1:2"
    assert config.allowed_hosts == LOCAL_HOSTS
    custom = Config.from_env(
        {"GATEWAY_LISTEN": "[::1]:9000", "GATEWAY_ALLOWED_HOSTS": "gw.example:*, *"}
    )
    assert custom.host_port == ("::1", 9000)
    assert custom.allowed_hosts == ("gw.example:*", "*")


def test_docs_mcp_md_mentions_every_mcp_tool_argument_G2():
    """G2: docs/mcp.md documents each MCP tool and every argument of its schema."""
    text = (REPO / "docs" / "mcp.md").read_text()
    for tool in tools.mcp_tools():
        assert f"### `{tool.name}`" in text
        for name in tool.input_schema["properties"]:
            assert f"`{name}`" in text, f"docs/mcp.md does not mention {tool.name}.{name}"


@pytest.mark.parametrize(
    ("tool", "args", "fault"),
    [
        ("functions", {"action": "status"}, "action 'status' needs call_id"),
        (
            "functions",
            {"action": "call", "function": "f", "crew": "a", "workflow_id": "b"},
            "action 'call' needs exactly one of crew or workflow_id (got crew, workflow_id)",
        ),
        (
            "functions",
            {"action": "reply", "call_id": "c", "text": "t", "file": "f", "offset": 1},
            "action 'reply' does not take file, offset; it takes call_id, text",
        ),
        (
            "get_crew_function_call",
            {"call_id": "c", "file": "f", "after": 3},
            "a read (with file) does not take after; it takes call_id, file, offset, limit",
        ),
        (
            "schedules",
            {"action": "update", "schedule_id": "s", "cron": "@daily", "interval_seconds": 60},
            "action 'update' takes at most one of cron or interval_seconds (got cron, "
            "interval_seconds)",
        ),
        (
            "wake_ups",
            {"action": "reschedule", "wake_up_id": "w"},
            "action 'reschedule' needs exactly one of at or delay_seconds",
        ),
        ("pauses", {"action": "status", "product": "crew:x"}, "does not take product"),
    ],
)
def test_per_action_schemas_word_their_faults_for_people_G2(tool, args, fault):
    """G2: each action's 2020-12 rule (required, exclusive and foreign arguments) is
    checked before any service is called, and the refusal says what to change."""
    with pytest.raises(InvalidArgument) as caught:
        tools.check_arguments(tools.find_tool(tool, mcp=False), args)
    assert caught.value.message == f"invalid arguments for {tool}: {fault}" or (
        fault in caught.value.message
    )
