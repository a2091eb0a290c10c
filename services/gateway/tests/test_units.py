"""Parts of the gateway that need no network: tokens, schemas, config, CLI settings, docs."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import psycopg
import pytest

from agentworks.client.errors import InvalidArgument, NotFound, PreconditionFailed
from agentworks_cli import docs as cli_docs
from agentworks_cli import main as cli
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
            "AGENTWORKS_INTERNAL_KEY": "k",
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


def test_cli_settings_prefer_flags_then_env_then_the_cli_json_file_G3(tmp_path):
    """G3: --url/--token, then AGENTWORKS_URL/AGENTWORKS_TOKEN, then the cli.json in
    AGENTWORKS_HOME (else .agentworks here or in the nearest parent that has one)."""
    (tmp_path / ".agentworks").mkdir()
    (tmp_path / ".agentworks" / "cli.json").write_text(
        json.dumps({"url": "http://file:1", "token": "aw_file"})
    )
    from_file = cli.resolve_settings(None, None, {}, tmp_path)
    assert (from_file.url, from_file.token) == ("http://file:1", "aw_file")
    # A token from the environment never goes to the URL of a cli.json: the URL comes
    # from the file only with the file's own token.
    from_env = cli.resolve_settings(None, None, {"AGENTWORKS_TOKEN": "aw_env"}, tmp_path)
    assert (from_env.url, from_env.token, from_env.config) == (cli.DEFAULT_URL, "aw_env", "")
    env_url = {"AGENTWORKS_URL": "http://env:4"}
    url_from_env = cli.resolve_settings(None, None, env_url, tmp_path)
    assert (url_from_env.url, url_from_env.token) == ("http://env:4", "aw_file")
    from_flags = cli.resolve_settings("http://flag:2", "aw_flag", {"AGENTWORKS_URL": "x"}, tmp_path)
    assert (from_flags.url, from_flags.token) == ("http://flag:2", "aw_flag")
    # From a subdirectory: the nearest parent's .agentworks/cli.json (as git finds .git).
    below = cli.resolve_settings(None, None, {}, tmp_path / "src" / "deep")
    assert (below.token, below.config) == ("aw_file", str(tmp_path / ".agentworks" / "cli.json"))
    nothing = cli.resolve_settings(None, None, {"AGENTWORKS_HOME": "none"}, tmp_path)
    assert (nothing.url, nothing.token) == (cli.DEFAULT_URL, "")
    # `agentworks up --home DIR` (or AGENTWORKS_HOME=DIR) wrote DIR/cli.json.
    home = tmp_path / "home"
    home.mkdir()
    (home / "cli.json").write_text(json.dumps({"url": "http://home:3", "token": "aw_home"}))
    from_home = cli.resolve_settings(None, None, {"AGENTWORKS_HOME": str(home)}, tmp_path / "x")
    assert (from_home.url, from_home.token) == ("http://home:3", "aw_home")
    relative = cli.resolve_settings(None, None, {"AGENTWORKS_HOME": "home"}, tmp_path)
    assert relative.token == "aw_home"


def test_cli_settings_never_send_a_given_token_to_the_url_of_a_parents_cli_json_G3(tmp_path):
    """G3: a cli.json in a parent (planted in /tmp/.agentworks, or shipped in a cloned
    repository) does not choose where AGENTWORKS_TOKEN / --token is sent; with both
    values given no cli.json is read, so a malformed one is no obstacle."""
    (tmp_path / ".agentworks").mkdir()
    planted = tmp_path / ".agentworks" / "cli.json"
    planted.write_text(json.dumps({"url": "http://attacker:1", "token": "aw_planted"}))
    below = tmp_path / "clone" / "src"
    token = {"AGENTWORKS_TOKEN": "aw_mine"}
    default = cli.resolve_settings(None, None, token, below)
    assert (default.url, default.url_source, default.token) == (
        cli.DEFAULT_URL,
        "default",
        "aw_mine",
    )
    flag = cli.resolve_settings(None, "aw_flag", {"AGENTWORKS_URL": "http://env:2"}, below)
    assert (flag.url, flag.token) == ("http://env:2", "aw_flag")

    planted.write_text("{not json")
    both = cli.resolve_settings("http://flag:3", None, token, below)
    assert (both.url, both.token, both.config) == ("http://flag:3", "aw_mine", "")
    from_env = cli.resolve_settings(None, None, {**token, "AGENTWORKS_URL": "http://e:4"}, below)
    assert (from_env.url, from_env.token) == ("http://e:4", "aw_mine")
    with pytest.raises(cli.UsageError, match="cannot read"):
        cli.resolve_settings(None, None, {}, below)  # the file must give the token: say so


def test_cli_settings_ignore_a_cli_json_another_user_owns_G3(tmp_path, monkeypatch):
    """G3: a cli.json not owned by the current user is ignored (parent walk and
    AGENTWORKS_HOME alike), and the "where it looked" message says so."""
    (tmp_path / ".agentworks").mkdir()
    planted = tmp_path / ".agentworks" / "cli.json"
    planted.write_text(json.dumps({"url": "http://attacker:1", "token": "aw_planted"}))
    assert cli.resolve_settings(None, None, {}, tmp_path).token == "aw_planted"  # ours
    monkeypatch.setattr(cli.os, "getuid", lambda: os.stat(planted).st_uid + 1)
    below = tmp_path / "src"
    ignored = cli.resolve_settings(None, None, {}, below)
    assert (ignored.url, ignored.token, ignored.config) == (cli.DEFAULT_URL, "", "")
    assert ignored.searched == (
        f".agentworks/cli.json in {below} and its parents (ignored, not owned by you: {planted})"
    )
    home = cli.resolve_settings(None, None, {"AGENTWORKS_HOME": ".agentworks"}, tmp_path)
    assert (home.token, home.config) == ("", "")
    assert home.searched.endswith(f"ignored: {planted} is not owned by you")


def test_every_error_code_has_a_documented_exit_code_G3():
    """G3: the exit codes are the documented ones, one per gRPC status the API returns."""
    documented = {code for code, _ in cli.EXIT_CODE_DOC}
    assert set(cli.EXIT_CODES.values()) <= documented
    assert cli.EXIT_CODES["UNAUTHENTICATED"] == 3 and cli.EXIT_CODES["NOT_FOUND"] == 4
    assert cli.EXIT_CODES["RESOURCE_EXHAUSTED"] == 5 and cli.EXIT_CODES["UNAVAILABLE"] == 7


def test_docs_cli_md_is_generated_from_the_current_parser_G3():
    """G3: docs/cli.md matches `python -m agentworks_cli.docs` (run `make docs`)."""
    rendered = cli_docs.render()
    for command in ("messages send", "messages read", "targets register", "tokens revoke"):
        assert f"### `agentworks {command}`" in rendered
    assert (REPO / "docs" / "cli.md").read_text() == rendered, "docs/cli.md is stale: make docs"


def test_docs_mcp_md_mentions_every_mcp_tool_argument_G2():
    """G2: docs/mcp.md documents each MCP tool and every argument of its schema."""
    text = (REPO / "docs" / "mcp.md").read_text()
    for tool in tools.mcp_tools():
        assert f"### `{tool.name}`" in text
        for name in tool.input_schema["properties"]:
            assert f"`{name}`" in text, f"docs/mcp.md does not mention {tool.name}.{name}"


def test_call_inputs_parse_as_json_when_they_can_and_as_strings_otherwise_G3_F3():
    """G3 F3: `-i KEY=VALUE` values are JSON when they parse (numbers, booleans, objects,
    quoted strings), else the text itself; a pair without '=' is a usage error."""
    from agentworks_gateway import cli_calls

    assert cli_calls.parse_input("count=3") == ("count", 3)
    assert cli_calls.parse_input("ratio=0.5") == ("ratio", 0.5)
    assert cli_calls.parse_input("dry_run=true") == ("dry_run", True)
    assert cli_calls.parse_input('tags=["a", "b"]') == ("tags", ["a", "b"])
    assert cli_calls.parse_input('opts={"x": null}') == ("opts", {"x": None})
    assert cli_calls.parse_input('id="007"') == ("id", "007")
    assert cli_calls.parse_input("id=007") == ("id", "007")  # not JSON: leading zeros
    assert cli_calls.parse_input("text=hello world") == ("text", "hello world")
    assert cli_calls.parse_input("query=a=b") == ("query", "a=b")
    assert cli_calls.parse_input("empty=") == ("empty", "")
    with pytest.raises(cli.UsageError, match="write KEY=VALUE"):
        cli_calls.parse_input("=3")
    assert cli_calls.parse_variable("region:string:required") == {
        "name": "region",
        "type": "string",
        "required": True,
    }
    assert cli_calls.parse_variable("limit:integer=10")["default"] == 10
    with pytest.raises(cli.UsageError, match="type 'text' is not one of string, integer"):
        cli_calls.parse_variable("x:text")


def test_scheduler_cli_reads_durations_and_local_times_G3_S1(monkeypatch):
    """G3 S1: durations take s/m/h/d; a time without an offset is local time, by the
    local zone's rules (a skipped time moves forward); an impossible date says why."""
    from agentworks_gateway import cli_scheduler

    assert [cli_scheduler.duration(v, "--delay") for v in ("90", "90s", "15m", "2h", "1d")] == [
        90,
        90,
        900,
        7200,
        86400,
    ]
    with pytest.raises(cli.UsageError, match="not a duration"):
        cli_scheduler.duration("-5m", "--delay")
    assert cli_scheduler.cli_time("2026-01-31T08:00:00Z", "--at") == "2026-01-31T08:00:00+00:00"
    assert cli_scheduler.cli_time("2026-01-31T09:00", "--at")[16:] != ""  # an offset was added
    with pytest.raises(cli.UsageError, match="is not a time"):
        cli_scheduler.cli_time("tomorrow", "--at")
    with pytest.raises(cli.UsageError, match="is not a time \\(day is out of range for month"):
        cli_scheduler.cli_time("2027-02-30T09:00", "--at")
    # Local time with its zone's rules: a time the clocks skip moves forward, as in cron.
    monkeypatch.setenv("TZ", "America/New_York")
    assert cli_scheduler.cli_time("2027-03-14T02:30", "--at") == "2027-03-14T03:30:00-04:00"
    assert cli_scheduler.cli_time("2027-01-14T02:30", "--at") == "2027-01-14T02:30:00-05:00"


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
