"""The tool reference of docs/agents.md, generated from the tool definitions (L11).

    python -m agentworks.agents.agent_tools.reference                  # print it
    python -m agentworks.agents.agent_tools.reference --write docs/agents.md

`markdown()` renders every tool of a turn and of an execution: its description, a table
of its arguments (type and limits, whether it may be null, what it is) and one of its
result's fields (from its output schema). `--write` replaces the text between the
BEGIN and END markers of the file (`make docs` runs it); a test checks the committed
file is current.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from types import SimpleNamespace
from typing import Any

from agentworks.agents.agent_tools.execution_tools import execution_toolbox
from agentworks.agents.agent_tools.toolbox import AgentTool
from agentworks.agents.agent_tools.turn_tools import turn_toolbox

BEGIN = (
    "<!-- BEGIN tool reference: generated from the tool definitions by `python -m "
    "agentworks.agents.agent_tools.reference --write docs/agents.md` (make docs); "
    "do not edit -->"
)
END = "<!-- END tool reference -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _types(schema: dict[str, Any]) -> tuple[str, bool]:
    """The schema's type without null, and whether null is allowed."""
    given = schema.get("type")
    names = [given] if isinstance(given, str) else list(given or [])
    nullable = "null" in names or None in schema.get("enum", ())
    names = [n for n in names if n != "null"]
    return " or ".join(names) or "any JSON", nullable


def _range(low: Any, high: Any) -> str:
    if low is None:
        return f"at most {high}"
    if high is None:
        return f"at least {low}"
    return f"{low} to {high}"


def type_text(schema: dict[str, Any]) -> str:
    """A property's type with its limits, as the reference shows it."""
    kind, _ = _types(schema)
    notes = []
    if "enum" in schema:
        notes.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"] if v is not None))
    if kind == "array":
        items = schema.get("items") or {}
        kind = f"array of {_types(items)[0]}"
        item_fields = list(items.get("properties") or {})
        if item_fields:
            notes.append("each with " + ", ".join(f"`{f}`" for f in item_fields))
    if kind == "object" and schema.get("properties"):
        notes.append("with " + ", ".join(f"`{f}`" for f in schema["properties"]))
    low, high = schema.get("minLength"), schema.get("maxLength")
    if high is not None:
        notes.append(f"{low or 0} to {high} characters")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        notes.append(_range(low, high))
    if "pattern" in schema:
        notes.append(f"matching `{schema['pattern']}`")
    for bound, word in (("minItems", "at least"), ("maxItems", "at most")):
        if bound in schema:
            notes.append(f"{word} {schema[bound]} items")
    return kind + (f" ({'; '.join(notes)})" if notes else "")


def arguments_table(tool: AgentTool) -> list[str]:
    properties = tool.input_schema.get("properties") or {}
    if not properties:
        return ["No arguments (`{}`)."]
    lines = ["| argument | type | may be null | what |", "| --- | --- | --- | --- |"]
    for name, schema in properties.items():
        _, nullable = _types(schema)
        optional = "yes: not given" if nullable else "no"
        description = _cell(schema.get("description", ""))
        lines.append(f"| `{name}` | {_cell(type_text(schema))} | {optional} | {description} |")
    return lines


def result_table(tool: AgentTool) -> list[str]:
    schema = tool.output_schema or {}
    properties = schema.get("properties") or {}
    if not properties:
        return ["Result: a JSON object."]
    required = set(schema.get("required") or ())
    lines = [
        "| result field | type | always there | what |",
        "| --- | --- | --- | --- |",
    ]
    for name, field in properties.items():
        always = "yes" if name in required else "no"
        description = _cell(field.get("description", ""))
        lines.append(f"| `{name}` | {_cell(type_text(field))} | {always} | {description} |")
    return lines


def _tool(tool: AgentTool, where: str) -> list[str]:
    hints = [
        "read-only" if tool.read_only else "",
        "destructive" if tool.destructive else "",
        "idempotent" if tool.idempotent else "",
    ]
    shown = ", ".join(h for h in hints if h) or "acts"
    return [
        f"#### `{tool.name}`{where}",
        "",
        f"{_cell(tool.description)} ({shown})",
        "",
        *arguments_table(tool),
        "",
        *result_table(tool),
        "",
    ]


def markdown() -> str:
    """The reference: the turn tools, then the execution tools a turn does not have
    (or has with other arguments)."""
    stand_in = SimpleNamespace()
    turn = turn_toolbox(stand_in).tools  # type: ignore[arg-type]
    execution = execution_toolbox(stand_in).tools  # type: ignore[arg-type]
    in_turn = {t.name: t for t in turn}
    in_execution = {t.name: t for t in execution}
    lines = [
        BEGIN,
        "",
        'A refusal is a result too: `{"error": {"code", "message"}}` (over MCP with '
        "`isError`). Every argument is in the schema's `required` (OpenAI strict mode); "
        "one that may be null is optional, and null means not given.",
        "",
        "### In a turn",
        "",
    ]
    for tool in turn:
        other = in_execution.get(tool.name)
        where = " (in a turn)" if other is not None and other != tool else ""
        lines += _tool(tool, where)
    lines += ["### In an execution", ""]
    shared = [t.name for t in execution if in_turn.get(t.name) == t]
    if shared:
        names = ", ".join(f"`{n}`" for n in shared)
        lines += [f"The turn's {names} too, as above.", ""]
    for tool in execution:
        if tool.name in shared:
            continue
        where = " (in an execution)" if tool.name in in_turn else ""
        lines += _tool(tool, where)
    return "\n".join([*lines, END]) + "\n"


def updated(document: str) -> str:
    """`document` with the text between the markers replaced by `markdown()`."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError("the document has no tool reference markers (BEGIN ... END)")
    rest = document[end + len(END) :]
    return document[:start] + markdown() + rest.removeprefix("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE", help="replace the reference in FILE")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(markdown())
        return 0
    path = pathlib.Path(args.write)
    path.write_text(updated(path.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
