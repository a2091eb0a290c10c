"""docs/agents.md's tool reference is generated from the tool definitions (L11): every
tool's arguments and results, current with the code."""

from __future__ import annotations

import pathlib
from types import SimpleNamespace
from typing import Any

import pytest

from agentworks.agents.agent_tools import execution_toolbox, turn_toolbox
from agentworks.agents.agent_tools.reference import BEGIN, END, markdown, updated

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "agents.md"


def test_the_docs_tool_reference_is_current_with_the_definitions_L11():
    """L11: the section between the markers of docs/agents.md is what the generator
    makes from the definitions now (run `make docs` after changing a tool)."""
    document = DOC.read_text()
    assert document.count(BEGIN) == 1 and document.count(END) == 1
    assert updated(document) == document, "docs/agents.md's tool reference is stale: make docs"


def documents(tool: Any, section: str) -> bool:
    """Whether `section` has a row for each of the tool's arguments, saying whether it
    may be null, and one for each result field."""
    arguments, _, results = section.partition("| result field |")

    def rows(part: str) -> dict[str, str]:
        return {x.split(" | ")[0]: x for x in part.splitlines() if x.startswith("| `")}

    given = rows(arguments)
    for name, schema in tool.input_schema["properties"].items():
        line = given.get(f"| `{name}`")
        nullable = "null" in schema.get("type", [])
        if line is None or ("| yes: not given |" in line) != nullable:
            return False
    fields = rows(results)
    return all(f"| `{name}`" in fields for name in (tool.output_schema or {})["properties"])


def test_the_reference_names_every_tools_arguments_and_result_fields_L11():
    """L11: every tool of a turn and of an execution has its heading, a row per argument
    (with whether it may be null) and a row per result field; ask_human's result shape
    is documented field by field."""
    text = markdown()
    sections = text.split("\n#### ")[1:]
    stand_in: Any = SimpleNamespace()
    for tool in [*turn_toolbox(stand_in).tools, *execution_toolbox(stand_in).tools]:
        mine = [s for s in sections if s.startswith(f"`{tool.name}`")]
        assert mine, tool.name
        assert any(documents(tool, section) for section in mine), tool.name
    ask = text[text.index("#### `ask_human`") :]
    assert "| `answered` | boolean | yes | true: a human answered" in ask
    assert "| `reply` | string | no | The human's answer" in ask


def test_writing_the_reference_replaces_only_the_marked_section_L11():
    """L11: --write keeps the text around the markers; a document without them is
    refused rather than appended to."""
    before = f"# Title\n\nprose\n\n{BEGIN}\nold\n{END}\nafter\n"
    after = updated(before)
    assert after.startswith("# Title\n\nprose\n\n" + BEGIN)
    assert after.endswith(END + "\nafter\n") and "\nold\n" not in after
    with pytest.raises(ValueError, match="markers"):
        updated("# no markers\n")
