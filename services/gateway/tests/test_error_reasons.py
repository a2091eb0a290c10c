"""A refusal's meaning travels end to end (P6, G1-G3): the reason and metadata a service
raises (google.rpc.ErrorInfo) arrive in the HTTP API's error body, in the MCP tool
result's structured content, and in the CLI's `--json` error object; people get the
words. Over the real stack: messaging and the gateway as the fixtures start them, the
official MCP client, the CLI as a subprocess."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentworks.core.errors import Reason

REPO = Path(__file__).resolve().parents[3]
SEND = "/api/v1/tools/messages"
TOKENS = "/api/v1/tools/tokens"
# Messaging refuses a send with no destination (a rule of its `destination` oneof).
NO_DESTINATION = {"action": "send", "message": "hi"}
# The gateway refuses token management to a caller without the operator role.
OPERATOR_ONLY = {"reason": "ROLE_REQUIRED", "metadata": {"role": "operator"}}
# The tools' `message` argument is messaging's `text`: a refusal naming `text` in its
# metadata names `message`, read from the metadata, never from the words.
NUL_MESSAGE = {"action": "send", "crew": "demo", "message": "a\x00b"}
ARGUMENT_NOTE = "(messaging's `text` is this tool's `message` argument)"


def _reason_and_metadata(error: dict) -> dict:
    return {"reason": error.get("reason"), "metadata": error.get("metadata")}


async def test_the_http_api_body_carries_the_reason_and_metadata_of_a_refusal_G1_P6(
    gateway, api, alice_token, demo
):
    """G1 P6: messaging's and the gateway's refusals answer with code, words, reason and
    metadata; a refusal of messaging's `text` names the `message` argument."""
    client = api(alice_token)
    missing = await client.post(SEND, json=NO_DESTINATION)
    assert missing.status_code == 400
    error = missing.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT"
    assert error["message"].startswith("destination is missing")
    assert error["reason"] == "FIELD_RULE"
    assert error["metadata"]["field"] == "destination"

    refused = await client.post(TOKENS, json={"action": "list"})
    assert refused.status_code == 403
    assert _reason_and_metadata(refused.json()["error"]) == OPERATOR_ONLY

    nul = await client.post(SEND, json=NUL_MESSAGE)
    assert nul.status_code == 400
    error = nul.json()["error"]
    assert error["metadata"]["field"] == "message"
    assert error["message"].endswith(ARGUMENT_NOTE)

    unknown = await api("aw_" + "x" * 43).post(SEND, json=NO_DESTINATION)
    assert unknown.status_code == 401
    assert unknown.json()["error"]["reason"] == "CREDENTIALS_INVALID"


async def test_an_mcp_tool_error_keeps_the_text_and_carries_the_reason_and_metadata_G2_P6(
    gateway, alice_token, demo, mcp_session
):
    """G2 P6: an isError result's text is the service's words; its structured content is
    the HTTP API's error object, reason and metadata included."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        missing = await mcp.call_tool("messages", NO_DESTINATION)
        assert missing.is_error
        error = missing.structured_content["error"]
        assert missing.content[0].text == error["message"]
        assert (error["code"], error["reason"]) == ("INVALID_ARGUMENT", "FIELD_RULE")
        assert error["metadata"]["field"] == "destination"

        unknown = await mcp.call_tool("messages", {"action": "read", "inbox_id": "in_nope"})
        assert unknown.is_error
        error = unknown.structured_content["error"]
        assert (error["code"], error["reason"]) == ("NOT_FOUND", "NOT_FOUND")

        nul = await mcp.call_tool("messages", NUL_MESSAGE)
        assert nul.is_error
        assert nul.structured_content["error"]["metadata"]["field"] == "message"
        assert nul.content[0].text.endswith(ARGUMENT_NOTE)


async def test_the_cli_prints_words_for_people_and_the_reason_and_metadata_under_json_G3_P6(
    gateway, cli, alice_token
):
    """G3 P6: a refused command says plain words on stderr; with --json its error object
    (code, message, reason, metadata) is on stdout; the exit code is the status's."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, out, err = await cli("tokens", "list", env=env)
    assert code == 3 and out == ""
    assert err.startswith("agentworks: only operators may list tokens")
    assert "ROLE_REQUIRED" not in err

    code, out, err = await cli("tokens", "list", "--json", env=env)
    assert code == 3, err
    error = json.loads(out)["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert error["message"].startswith("only operators may list tokens")
    assert _reason_and_metadata(error) == OPERATOR_ONLY

    # The CLI's own refusal (no gateway there) has a reason too, said by the client.
    nobody = {**env, "AGENTWORKS_URL": "http://127.0.0.1:9"}
    code, out, err = await cli("tokens", "list", "--json", env=nobody)
    assert code == 7, err
    error = json.loads(out)["error"]
    assert error["reason"] == "UNREACHABLE"
    assert error["metadata"] == {"url": "http://127.0.0.1:9", "url_source": "AGENTWORKS_URL"}


# Reading an error's words to decide something: `exc.message.startswith(...)`,
# `"..." in exc.message`, `"..." in str(exc)` and the like.
MATCHING_WORDS = re.compile(
    r"\.message\.(startswith|endswith|removeprefix|removesuffix|find|index|split|partition)\("
    r"|\bin\s+(exc|error|err|e|refused)\.message\b"
    r"|\bin\s+str\((exc|error|err|e)\)"
    r"|\bre\.\w+\([^)]*\b(exc|error|err)\.message\b"
)
NO_MATCHING = ("services/gateway/src", "tools/agentworks-cli/src", "libs/agentworks-client/src")


def test_no_gateway_cli_or_client_source_matches_an_errors_words_P6():
    """P6: the gateway, the CLI and the typed clients tell refusals apart by their reason
    and metadata (ErrorInfo), never by matching the words of a message."""
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for root in NO_MATCHING
        for path in sorted((REPO / root).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if MATCHING_WORDS.search(line)
    ]
    assert found == []


def test_every_reason_is_in_the_table_of_docs_errors_md_P6():
    """P6: each reason has one definition (agentworks.core.errors.Reason) and one row in
    docs/errors.md saying what it means and what metadata it carries."""
    table = (REPO / "docs" / "errors.md").read_text()
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE))
    assert rows == {reason.value for reason in Reason}
