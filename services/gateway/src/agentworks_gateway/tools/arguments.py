"""A tool call's arguments: checked against the tool's JSON Schema, every fault worded for
a person in one refusal (G2, P6), and what cannot be encoded for a service (lone
surrogates) refused before any call. The services check their own rules (sizes, NUL
characters, formats) and word those refusals; the gateway passes them on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from agentworks.client import errors
from agentworks.client.checks import check_json_depth
from agentworks_gateway.tools.toolkit import Args, Tool

# Arguments that are JSON documents of the caller's: their depth is bounded before any
# recursive walk here (schema validation, text checks) can be made to go deep.
JSON_PAYLOADS = ("inputs", "parts", "input_schema", "output_schema", "workflow")
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_arguments(tool: Tool, args: Any) -> Args:
    """The arguments if they match the tool's schema; else InvalidArgument listing each fault."""
    if not isinstance(args, dict):
        raise errors.InvalidArgument(
            f"arguments of {tool.name} must be a JSON object, got {type(args).__name__}"
        )
    for name in JSON_PAYLOADS:  # first: the checks below walk the JSON recursively
        if name in args:
            try:
                check_json_depth(args[name], name)
            except errors.InvalidArgument as exc:
                raise errors.InvalidArgument(
                    f"invalid arguments for {tool.name}: {exc.message}"
                ) from None
    faults = describe_faults(tool.input_schema, tool.validator.iter_errors(args), args)
    if not faults:  # the shape is right: now what cannot be encoded for a service
        faults = text_faults(args)
    if faults:
        raise errors.InvalidArgument(f"invalid arguments for {tool.name}: " + "; ".join(faults))
    # JSON Schema counts 2.0 as an integer; the services' integer fields take only ints.
    properties = tool.input_schema.get("properties", {})
    return {
        name: int(value)
        if isinstance(value, float) and properties.get(name, {}).get("type") == "integer"
        else value
        for name, value in args.items()
    }


def _rule_context(schema: Mapping[str, Any], path: list[Any]) -> str:
    """`action 'status'` for a fault inside an action rule, `with file` for a dependency."""
    if "then" in path:
        rule = path_value(schema, path[: path.index("then")])
        return f"action {rule['if']['properties']['action']['const']!r}"
    if "dependentSchemas" in path:
        return f"a read (with {path[path.index('dependentSchemas') + 1]})"
    return "this tool"


def _or(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def describe_faults(
    schema: Mapping[str, Any], found: Iterable[Any], args: Mapping[str, Any]
) -> list[str]:
    """Every argument fault, worded for a person; arguments an action does not take are
    named together (`action 'status' does not take crew, text; it takes ...`)."""
    faults: list[str] = []
    # context -> (index of its fault, arguments it does not take, arguments it takes)
    foreign: dict[str, tuple[int, list[str], list[str]]] = {}
    for error in sorted(found, key=lambda e: list(e.path)):
        path = list(error.absolute_schema_path)
        if "propertyNames" not in path:
            faults.append(describe_fault(schema, error, args))
        elif error.instance in schema.get("properties", {}):  # additionalProperties names the rest
            context = _rule_context(schema, path)
            if context not in foreign:
                allowed = [n for n in path_value(schema, path) if n != "action"]
                foreign[context] = (len(faults), [], allowed)
                faults.append("")
            foreign[context][1].append(str(error.instance))
    for context, (index, names, allowed) in foreign.items():
        faults[index] = (
            f"{context} does not take {', '.join(names)}; "
            f"it takes {', '.join(allowed) or 'nothing else'}"
        )
    return faults


def describe_fault(schema: Mapping[str, Any], error: Any, args: Mapping[str, Any]) -> str:
    """One argument fault, worded for a person; `where: message` for property faults."""
    path = list(error.absolute_schema_path)
    where = ".".join(str(p) for p in error.path)
    message = error.message
    if error.validator == "required" and ("then" in path or "dependentSchemas" in path):
        missing = [n for n in error.validator_value if n not in args]
        return f"{_rule_context(schema, path)} needs {', '.join(missing)}"
    if error.validator == "oneOf" and "then" in path:
        names = [alt["required"][0] for alt in error.validator_value]
        given = [n for n in names if n in args]
        got = f" (got {', '.join(given)})" if given else ""
        return f"{_rule_context(schema, path)} needs exactly one of {_or(names)}{got}"
    if error.validator == "not" and "then" in path:
        names = sorted({n for alt in error.validator_value["anyOf"] for n in alt["required"]})
        given = [n for n in names if n in args]
        return (
            f"{_rule_context(schema, path)} takes at most one of {_or(names)} "
            f"(got {', '.join(given)})"
        )
    if error.validator == "dependentRequired":
        for name, deps in error.validator_value.items():
            missing = [d for d in deps if d not in args]
            if name in args and missing:
                return f"{name} needs {', '.join(missing)} too"
    if error.validator == "pattern" and "description" in error.schema:
        message = f"{error.instance!r} is not valid: expected {error.schema['description']}"
    elif error.validator == "minLength" and error.instance == "":
        message = "is empty"
    elif error.validator in ("maxLength", "minLength") and isinstance(error.instance, str):
        # jsonschema quotes the whole value ("'nnn…' is too long"): say the limit instead.
        bound = "at most" if error.validator == "maxLength" else "at least"
        message = (
            f"is {len(error.instance)} characters; it must be {bound} "
            f"{error.validator_value} characters"
        )
    return f"{where}: {message}" if where else message


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _text_problem(text: str) -> str | None:
    found = _SURROGATE.search(text)
    if found:
        return (
            f"contains a lone surrogate (\\u{ord(found[0]):04x}), which is not Unicode text: "
            "send UTF-8"
        )
    return None


def text_faults(value: Any, path: str = "") -> list[str]:
    """Strings (and keys) anywhere in the arguments that cannot be sent to a service:
    lone surrogates (not Unicode: JSON can carry `\\ud800`, protobuf's UTF-8 strings
    cannot). Translation, not a rule: what the services cannot store (NUL characters,
    sizes) they refuse themselves, naming the field."""
    faults: list[str] = []
    if isinstance(value, str):
        problem = _text_problem(value)
        faults += [f"{path}: {problem}"] if problem else []
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = _text_problem(str(key))
            faults += [f"{path or 'arguments'}: the key {key!r} {problem}"] if problem else []
            faults += text_faults(item, _join(path, repr(key) if problem else key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            faults += text_faults(item, _join(path, index))
    return faults


def path_value(schema: Mapping[str, Any], path: list[Any]) -> Any:
    """The schema node at an absolute schema path."""
    node: Any = schema
    for step in path:
        node = node[step]
    return node
