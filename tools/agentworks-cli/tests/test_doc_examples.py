"""The docs' and the CLI's examples (V8): every `--wait` the CLI, `agentworks up`'s banner
and the docs suggest is one value, the longest a read waits per request; the docs say
how to change the default ports their examples assume."""

from __future__ import annotations

import pathlib
import re

from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks_cli import messages
from agentworks_dev import banner

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_suggested_wait_is_the_one_maximum_V8():
    """V8: `--wait N` in the README, docs/, the CLI and the banner is MAX_WAIT_SECONDS,
    and the CLI's own follow wait is it too (the issue found 10, 20 and 25)."""
    assert messages.FOLLOW_WAIT_SECONDS == MAX_WAIT_SECONDS
    places = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    places += [pathlib.Path(m.__file__ or "") for m in (messages, banner)]
    found = {
        (path.name, int(n))
        for path in places
        for n in re.findall(r"--wait[ =](\d+)", path.read_text())
    }
    assert found and {n for _, n in found} == {MAX_WAIT_SECONDS}, sorted(found)


def test_docs_say_how_to_change_the_default_ports_before_their_examples_V8():
    """V8: docs/cli.md, mcp.md and console.md, whose examples assume the default ports,
    point to the README's ports settings once, before their first example."""
    for name in ("cli.md", "mcp.md", "console.md"):
        text = (ROOT / "docs" / name).read_text()
        pointer = text.find("(../README.md#two-commands)")
        fence = text.find("```")
        assert 0 <= pointer < (fence if fence >= 0 else len(text)), name
        assert text.count("(../README.md#two-commands)") == 1, name
    assert "AGENTWORKS_HTTP_PORT=" in (ROOT / "README.md").read_text()
