"""Parts of the CLI that need no gateway: settings, exit codes, docs/cli.md, argument
parsing, `agentworks up` without agentworks-dev, and what the CLI imports (G3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentworks_cli import docs, errors, inputs, main, scheduler, settings
from agentworks_cli.errors import UsageError
from agentworks_cli.settings import DEFAULT_URL, resolve_settings

REPO = Path(__file__).resolve().parents[3]


def test_cli_settings_prefer_flags_then_env_then_the_cli_json_file_G3(tmp_path):
    """G3: --url/--token, then AGENTWORKS_URL/AGENTWORKS_TOKEN, then the cli.json in
    AGENTWORKS_HOME (else .agentworks here or in the nearest parent that has one)."""
    (tmp_path / ".agentworks").mkdir()
    (tmp_path / ".agentworks" / "cli.json").write_text(
        json.dumps({"url": "http://file:1", "token": "aw_file"})
    )
    from_file = resolve_settings(None, None, {}, tmp_path)
    assert (from_file.url, from_file.token) == ("http://file:1", "aw_file")
    # A token from the environment never goes to another host a cli.json names: with a
    # token given, the file's URL is used only when it is on this machine.
    from_env = resolve_settings(None, None, {"AGENTWORKS_TOKEN": "aw_env"}, tmp_path)
    assert (from_env.url, from_env.token, from_env.config) == (DEFAULT_URL, "aw_env", "")
    env_url = {"AGENTWORKS_URL": "http://env:4"}
    url_from_env = resolve_settings(None, None, env_url, tmp_path)
    assert (url_from_env.url, url_from_env.token) == ("http://env:4", "aw_file")
    from_flags = resolve_settings("http://flag:2", "aw_flag", {"AGENTWORKS_URL": "x"}, tmp_path)
    assert (from_flags.url, from_flags.token) == ("http://flag:2", "aw_flag")
    # From a subdirectory: the nearest parent's .agentworks/cli.json (as git finds .git).
    below = resolve_settings(None, None, {}, tmp_path / "src" / "deep")
    assert (below.token, below.config) == ("aw_file", str(tmp_path / ".agentworks" / "cli.json"))
    nothing = resolve_settings(None, None, {"AGENTWORKS_HOME": "none"}, tmp_path)
    assert (nothing.url, nothing.token) == (DEFAULT_URL, "")
    # `agentworks up --home DIR` (or AGENTWORKS_HOME=DIR) wrote DIR/cli.json.
    home = tmp_path / "home"
    home.mkdir()
    (home / "cli.json").write_text(json.dumps({"url": "http://home:3", "token": "aw_home"}))
    from_home = resolve_settings(None, None, {"AGENTWORKS_HOME": str(home)}, tmp_path / "x")
    assert (from_home.url, from_home.token) == ("http://home:3", "aw_home")
    relative = resolve_settings(None, None, {"AGENTWORKS_HOME": "home"}, tmp_path)
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
    default = resolve_settings(None, None, token, below)
    assert (default.url, default.url_source, default.token) == (
        DEFAULT_URL,
        "default",
        "aw_mine",
    )
    flag = resolve_settings(None, "aw_flag", {"AGENTWORKS_URL": "http://env:2"}, below)
    assert (flag.url, flag.token) == ("http://env:2", "aw_flag")

    planted.write_text("{not json")
    both = resolve_settings("http://flag:3", None, token, below)
    assert (both.url, both.token, both.config) == ("http://flag:3", "aw_mine", "")
    from_env = resolve_settings(None, None, {**token, "AGENTWORKS_URL": "http://e:4"}, below)
    assert (from_env.url, from_env.token) == ("http://e:4", "aw_mine")
    with pytest.raises(UsageError, match="cannot read"):
        resolve_settings(None, None, {}, below)  # the file must give the token: say so


def test_a_token_given_without_a_url_goes_to_the_loopback_url_of_cli_json_G3(tmp_path):
    """G3: --token (or AGENTWORKS_TOKEN) without --url / AGENTWORKS_URL goes to the URL
    `agentworks up` saved in cli.json when it is on this machine (loopback, localhost),
    never to another host a cli.json names; an unreadable cli.json is then no obstacle."""
    (tmp_path / ".agentworks").mkdir()
    saved = tmp_path / ".agentworks" / "cli.json"
    for url in ("http://127.0.0.1:7880", "http://localhost:7880", "http://[::1]:7880"):
        saved.write_text(json.dumps({"url": url, "token": "aw_file"}))
        flag = resolve_settings(None, "aw_flag", {}, tmp_path / "deep")
        assert (flag.url, flag.url_source, flag.token) == (url, str(saved), "aw_flag")
        assert flag.config == str(saved)
        env = resolve_settings(None, None, {"AGENTWORKS_TOKEN": "aw_env"}, tmp_path)
        assert (env.url, env.token) == (url, "aw_env")
        given = resolve_settings("http://flag:1", "aw_flag", {}, tmp_path)
        assert given.url == "http://flag:1"
    saved.write_text(json.dumps({"url": "http://gateway.example:80", "token": "aw_file"}))
    elsewhere = resolve_settings(None, "aw_flag", {}, tmp_path)
    assert (elsewhere.url, elsewhere.url_source, elsewhere.config) == (DEFAULT_URL, "default", "")
    saved.write_text("{not json")
    assert resolve_settings(None, "aw_flag", {}, tmp_path).url == DEFAULT_URL


def test_cli_settings_ignore_a_cli_json_another_user_owns_G3(tmp_path, monkeypatch):
    """G3: a cli.json not owned by the current user is ignored (parent walk and
    AGENTWORKS_HOME alike), and the "where it looked" message says so."""
    (tmp_path / ".agentworks").mkdir()
    planted = tmp_path / ".agentworks" / "cli.json"
    planted.write_text(json.dumps({"url": "http://attacker:1", "token": "aw_planted"}))
    assert resolve_settings(None, None, {}, tmp_path).token == "aw_planted"  # ours
    monkeypatch.setattr(settings.os, "getuid", lambda: os.stat(planted).st_uid + 1)
    below = tmp_path / "src"
    ignored = resolve_settings(None, None, {}, below)
    assert (ignored.url, ignored.token, ignored.config) == (DEFAULT_URL, "", "")
    assert ignored.searched == (
        f".agentworks/cli.json in {below} and its parents (ignored, not owned by you: {planted})"
    )
    home = resolve_settings(None, None, {"AGENTWORKS_HOME": ".agentworks"}, tmp_path)
    assert (home.token, home.config) == ("", "")
    assert home.searched.endswith(f"ignored: {planted} is not owned by you")


def test_every_error_code_has_a_documented_exit_code_G3():
    """G3: the exit codes are the documented ones, one per gRPC status the API returns."""
    documented = {code for code, _ in errors.EXIT_CODE_DOC}
    assert set(errors.EXIT_CODES.values()) <= documented
    assert errors.EXIT_CODES["UNAUTHENTICATED"] == 3 and errors.EXIT_CODES["NOT_FOUND"] == 4
    assert errors.EXIT_CODES["RESOURCE_EXHAUSTED"] == 5 and errors.EXIT_CODES["UNAVAILABLE"] == 7


def test_docs_cli_md_is_generated_from_the_current_parser_G3():
    """G3: docs/cli.md matches `python -m agentworks_cli.docs` (run `make docs`)."""
    rendered = docs.render()
    for command in ("messages send", "messages read", "targets register", "tokens revoke"):
        assert f"### `agentworks {command}`" in rendered
    assert (REPO / "docs" / "cli.md").read_text() == rendered, "docs/cli.md is stale: make docs"


def test_call_inputs_parse_as_json_when_they_can_and_as_strings_otherwise_G3_F3():
    """G3 F3: `-i KEY=VALUE` values are JSON when they parse (numbers, booleans, objects,
    quoted strings), else the text itself; a pair without '=' is a usage error."""
    assert inputs.parse_input("count=3") == ("count", 3)
    assert inputs.parse_input("ratio=0.5") == ("ratio", 0.5)
    assert inputs.parse_input("dry_run=true") == ("dry_run", True)
    assert inputs.parse_input('tags=["a", "b"]') == ("tags", ["a", "b"])
    assert inputs.parse_input('opts={"x": null}') == ("opts", {"x": None})
    assert inputs.parse_input('id="007"') == ("id", "007")
    assert inputs.parse_input("id=007") == ("id", "007")  # not JSON: leading zeros
    assert inputs.parse_input("text=hello world") == ("text", "hello world")
    assert inputs.parse_input("query=a=b") == ("query", "a=b")
    assert inputs.parse_input("empty=") == ("empty", "")
    with pytest.raises(UsageError, match="write KEY=VALUE"):
        inputs.parse_input("=3")
    assert inputs.parse_variable("region:string:required") == {
        "name": "region",
        "type": "string",
        "required": True,
    }
    assert inputs.parse_variable("limit:integer=10")["default"] == 10
    with pytest.raises(UsageError, match="type 'text' is not one of string, integer"):
        inputs.parse_variable("x:text")


def test_scheduler_cli_reads_durations_and_local_times_G3_S1(monkeypatch):
    """G3 S1: durations take s/m/h/d; a time without an offset is local time, by the
    local zone's rules (a skipped time moves forward); an impossible date says why."""
    assert [scheduler.duration(v, "--delay") for v in ("90", "90s", "15m", "2h", "1d")] == [
        90,
        90,
        900,
        7200,
        86400,
    ]
    with pytest.raises(UsageError, match="not a duration"):
        scheduler.duration("-5m", "--delay")
    assert scheduler.cli_time("2026-01-31T08:00:00Z", "--at") == "2026-01-31T08:00:00+00:00"
    assert scheduler.cli_time("2026-01-31T09:00", "--at")[16:] != ""  # an offset was added
    with pytest.raises(UsageError, match="is not a time"):
        scheduler.cli_time("tomorrow", "--at")
    with pytest.raises(UsageError, match="is not a time \\(day is out of range for month"):
        scheduler.cli_time("2027-02-30T09:00", "--at")
    # Local time with its zone's rules: a time the clocks skip moves forward, as in cron.
    monkeypatch.setenv("TZ", "America/New_York")
    assert scheduler.cli_time("2027-03-14T02:30", "--at") == "2027-03-14T03:30:00-04:00"
    assert scheduler.cli_time("2027-01-14T02:30", "--at") == "2027-01-14T02:30:00-05:00"


def test_agentworks_up_without_agentworks_dev_says_what_to_install_G3(monkeypatch, capsys):
    """G3: `agentworks up` needs the supervisor package; without it, exit 2 and say so."""
    monkeypatch.setitem(sys.modules, "agentworks_dev", None)  # as if not installed
    assert main.main(["up", "--help"]) == 2
    assert capsys.readouterr().err == (
        "agentworks: `agentworks up` needs the agentworks-dev package; `make run` installs it\n"
    )


# Importing the CLI, building its parser and rendering its docs loads none of these: the
# CLI is a client of the gateway's HTTP API (docs/architecture.md).
SERVER_SIDE = ("agentworks_gateway", "agentworks.server", "sqlalchemy", "psycopg", "psycopg2")

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import agentworks_cli
from agentworks_cli import docs
names = [m.name for m in pkgutil.iter_modules(agentworks_cli.__path__) if m.name != "__main__"]
for name in names:
    importlib.import_module("agentworks_cli." + name)
importlib.import_module("agentworks.core.logging")  # what main() imports to run a command
docs.render()
print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))
"""


def test_the_cli_imports_no_server_code_G3():
    """G3: every module of agentworks_cli imports without the gateway, the server library,
    SQLAlchemy or psycopg (checked in a fresh interpreter: sys.modules there is the CLI's)."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"main", "parser", "settings", "errors", "output", "api", "docs"} <= set(
        result["modules"]
    )
    server_side = [
        name
        for name in result["loaded"]
        if any(name == root or name.startswith(root + ".") for root in SERVER_SIDE)
    ]
    assert server_side == []
