"""The agent tool set's types: a tool's definition, its refusal, and a toolbox (L1).

A `Toolbox` holds the tools one turn or one execution offers. `call` checks the
arguments against the tool's JSON Schema before anything is sent (a `ToolError` naming
each bad field, nothing stored), runs the tool, and turns a service's refusal into a
`ToolError` with the service's own words, so a model reads what was wrong and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError

from agentworks.agents.agent_tools.schemas import is_nullable, types
from agentworks.core import errors

JSONSCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AgentTool:
    """One tool's definition, the same for MCP, OpenAI and Anthropic (L1-L3).

    `input_schema` is a flat JSON Schema (draft 2020-12) of type object: properties with
    simple types, no allOf/anyOf/oneOf/if/then, so every tool-calling API accepts it;
    OpenAI-strict as given (L10): every property required, the optional ones nullable,
    where null (or leaving the field out) means "not given". Rules a flat schema cannot
    say (give exactly one of two fields) are checked by the tool and worded in its
    description.

    `json_text` names string fields that carry JSON text (`call_function.inputs`): an
    object given there instead is taken as its JSON text, for callers that send one.
    """

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    read_only: bool
    destructive: bool
    idempotent: bool
    json_text: tuple[str, ...] = ()


class ToolError(Exception):
    """A refusal or bad input, with a message written for the model (no traceback).

    `code` is the gRPC status name of a service's refusal (`INVALID_ARGUMENT`,
    `NOT_FOUND`, `FAILED_PRECONDITION`, `RESOURCE_EXHAUSTED`, ...), or
    `INVALID_ARGUMENT` for arguments the schema refused, `UNIMPLEMENTED` for a tool
    this runtime cannot serve, `NOT_FOUND` for an unknown tool.
    """

    def __init__(self, message: str, *, code: str = "INVALID_ARGUMENT") -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def as_result(self) -> dict[str, Any]:
        """The refusal as a tool result: `{"error": {"code": ..., "message": ...}}`."""
        return {"error": {"code": self.code, "message": self.message}}


def _field(error: ValidationError) -> str:
    path = ".".join(str(part) for part in error.absolute_path)
    return path or "arguments"


def _fault(error: ValidationError) -> str:
    """One schema fault worded with the field it is about."""
    if error.validator == "required":
        # One error per missing field, each with the whole list: one fault says them all.
        where = "" if _field(error) == "arguments" else f"{_field(error)}."
        missing = [where + n for n in error.validator_value if n not in error.instance]
        if len(missing) == 1:
            return f"{missing[0]} is required"
        return f"{', '.join(missing[:-1])} and {missing[-1]} are required"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        where = "" if _field(error) == "arguments" else f" in {_field(error)}"
        known = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        plural = "s" if len(extra) > 1 else ""
        return f"unknown field{plural} {', '.join(extra)}{where} (the fields are {known})"
    value = error.instance
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    if error.validator == "type":
        kinds = error.validator_value
        kinds = " or ".join(kinds) if isinstance(kinds, list) else kinds
        return f"{_field(error)} must be of type {kinds}, got {shown}"
    if error.validator == "enum":
        choices = ", ".join("null" if v is None else repr(v) for v in error.validator_value)
        return f"{_field(error)} must be one of {choices}, got {shown}"
    if error.validator == "pattern":
        return f"{_field(error)} {shown} does not match the pattern {error.validator_value}"
    if error.validator in ("minLength", "maxLength"):
        size = "at least" if error.validator == "minLength" else "at most"
        return f"{_field(error)} must be {size} {error.validator_value} characters long"
    if error.validator in ("minimum", "maximum"):
        bound = "at least" if error.validator == "minimum" else "at most"
        return f"{_field(error)} must be {bound} {error.validator_value}, got {shown}"
    return f"{_field(error)}: {error.message}"


def check_arguments(tool: AgentTool, arguments: Any) -> dict[str, Any]:
    """The arguments if they meet the tool's schema, integers as ints, optional fields
    given as null left out (L10: null means "not given"); else a ToolError naming every
    bad field."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ToolError(
            f"the arguments of {tool.name} must be a JSON object, got {type(arguments).__name__}"
        )
    arguments = dict(arguments)
    properties = tool.input_schema.get("properties", {})
    # A caller that is not strict leaves optional fields out: that is null too.
    for name, prop in properties.items():
        if name not in arguments and is_nullable(prop):
            arguments[name] = None
    for name in tool.json_text:
        if isinstance(arguments.get(name), Mapping):
            arguments[name] = json.dumps(arguments[name], ensure_ascii=False)
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    faults = sorted({_fault(e) for e in validator.iter_errors(arguments)})
    if faults:
        raise ToolError(f"invalid arguments for {tool.name}: " + "; ".join(faults))
    # JSON Schema counts 2.0 as an integer; the services' integer fields take only ints.
    return {
        name: int(value)
        if isinstance(value, float) and "integer" in types(properties.get(name, {}))
        else value
        for name, value in arguments.items()
        if value is not None
    }


class Toolbox:
    """The tools one turn or one execution offers, and the way to call them (L1)."""

    def __init__(self, entries: Iterable[tuple[AgentTool, ToolHandler]]) -> None:
        self._entries: dict[str, tuple[AgentTool, ToolHandler]] = {}
        for tool, handler in entries:
            if tool.name in self._entries:
                raise ValueError(f"two tools are named {tool.name!r}")
            self._entries[tool.name] = (tool, handler)

    @property
    def tools(self) -> Sequence[AgentTool]:
        """The tools, in the order they were given."""
        return [tool for tool, _ in self._entries.values()]

    @property
    def names(self) -> list[str]:
        return list(self._entries)

    def tool(self, name: str) -> AgentTool:
        """The tool called `name`; ToolError (`NOT_FOUND`) naming the tools there are."""
        try:
            return self._entries[name][0]
        except KeyError:
            raise ToolError(
                f"there is no tool {name!r}: the tools are {', '.join(self._entries)}",
                code="NOT_FOUND",
            ) from None

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run one tool; arguments checked against its schema (ToolError naming the
        field); service errors become ToolError with the service's message; the result
        is a JSON-ready dict.

        An execution that was cancelled or lost its lease raises `ExecutionStopped`:
        that is not a refusal the model can act on, and the loop should stop.
        """
        tool = self.tool(name)
        checked = check_arguments(tool, arguments)
        handler = self._entries[name][1]
        try:
            return await handler(checked)
        except errors.AgentWorksError as exc:
            raise ToolError(exc.message, code=exc.code.name) from None


def unavailable(tool: str, method: str) -> ToolError:
    """The refusal of a tool whose context method this runtime does not have yet."""
    return ToolError(
        f"{tool} is not available in this runtime yet: it needs {method}, which this "
        "version of the AgentWorks SDK does not offer. Use the other tools.",
        code="UNIMPLEMENTED",
    )
