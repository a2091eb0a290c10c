"""A tool call's arguments: checked against the tool's JSON Schema, every fault worded for
a person in one refusal (G2, P6), and what cannot be encoded for a service (lone
surrogates) refused before any call. The services check their own rules (sizes, NUL
characters, formats) and word those refusals; the gateway passes them on.

Cheap rules run first (B1): the sizes the schema states (`maxItems`, `maxLength`,
`maxProperties`, read with `len`), then one walk that counts the arguments' JSON values
(at most `MAX_ARGUMENT_VALUES`) and their depth; only then the JSON Schema check, whose
work that bounds: it descends only into arrays of at most `maxItems` (or
`DEFAULT_MAX_ITEMS`) items. 50,000 `parts` took 3.7 s of the serving loop to refuse
when the schema check ran first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentworks.core import errors
from agentworks.core.limits import MAX_JSON_DEPTH
from agentworks_gateway.tools.toolkit import Args, Tool

# Arguments that are JSON documents of the caller's: their depth is bounded before any
# recursive walk here (schema validation, text checks) can be made to go deep.
JSON_PAYLOADS = ("inputs", "parts", "input_schema", "output_schema", "workflow")
_SURROGATE = re.compile("[\ud800-\udfff]")
# JSON values (objects, arrays, strings, numbers, ...) one call's arguments may hold: a
# 1 MiB body holds at most about 500,000; counting them is the one walk of them all.
MAX_ARGUMENT_VALUES = 50_000
# Items of an array the schema checks item by item, where the schema states no maxItems
# (e.g. `parts`; messaging bounds their bytes, 256 KiB, not their count).
DEFAULT_MAX_ITEMS = 1000


def check_arguments(tool: Tool, args: Any) -> Args:
    """The arguments if they match the tool's schema; else InvalidArgument listing each fault."""
    if not isinstance(args, dict):
        raise errors.InvalidArgument(
            f"arguments of {tool.name} must be a JSON object, got {type(args).__name__}",
            reason=errors.Reason.MALFORMED,
            metadata={"tool": tool.name},
        )
    # First what len() tells, then one bounded walk: the checks below walk the JSON.
    refuse_oversized(tool, args)
    try:
        surrogates = measure(args)
    except errors.InvalidArgument as exc:
        raise errors.InvalidArgument(
            f"invalid arguments for {tool.name}: {exc.message}",
            reason=exc.reason,
            metadata={**exc.metadata, "tool": tool.name},
        ) from None
    schema_errors = sorted(tool.validator.iter_errors(args), key=_where)
    faults = [describe_fault(error) for error in schema_errors]
    faults = action_faults(tool, args) + (tool.faults(args) if tool.faults else []) + faults
    if not faults and surrogates:  # the shape is right: now what cannot be sent on
        faults = text_faults(args)
    if faults:
        raise errors.InvalidArgument(
            f"invalid arguments for {tool.name}: " + "; ".join(faults),
            reason=errors.Reason.FIELD_RULE,
            metadata=_fields(tool, schema_errors),
        )
    # JSON Schema counts 2.0 as an integer; the services' integer fields take only ints.
    properties = tool.input_schema.get("properties", {})
    return {
        name: int(value)
        if isinstance(value, float) and properties.get(name, {}).get("type") == "integer"
        else value
        for name, value in args.items()
    }


def refuse_oversized(tool: Tool, args: Any) -> None:
    """InvalidArgument when the arguments (a JSON object) break the size rules of the
    tool's schema (`size_faults`): the first check of `check_arguments`, read with `len`."""
    faults = size_faults(tool.input_schema, args) if isinstance(args, dict) else []
    if faults:
        raise errors.InvalidArgument(
            f"invalid arguments for {tool.name}: " + "; ".join(faults),
            reason=errors.Reason.FIELD_RULE,
            metadata={"tool": tool.name},
        )


def size_faults(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """What the schema's size keywords refuse, read with `len` before anything is walked:
    `maxLength`, `maxProperties`, and `maxItems` (`DEFAULT_MAX_ITEMS` for an array whose
    items the schema checks one by one). Descends only into properties and into arrays
    within their bound, so its work is bounded by the schema."""
    faults: list[str] = []
    where = f"{path}: " if path else ""
    if isinstance(value, str) and "maxLength" in schema and len(value) > schema["maxLength"]:
        # jsonschema would say it too, quoting the whole value; this says the numbers.
        faults.append(
            f"{where}is {len(value)} characters; it must be at most {schema['maxLength']} "
            "characters"
        )
    elif isinstance(value, list):
        limit = schema.get("maxItems", DEFAULT_MAX_ITEMS if "items" in schema else None)
        if limit is not None and len(value) > limit:
            faults.append(f"{where}has {len(value)} items; at most {limit} are taken")
        elif isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                faults += size_faults(schema["items"], item, _join(path, index))
                if faults:
                    break
    elif isinstance(value, dict):
        limit = schema.get("maxProperties")
        if limit is not None and len(value) > limit:
            faults.append(f"{where}has {len(value)} properties; at most {limit} are taken")
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and not faults:
            for name, sub in properties.items():
                if name in value and isinstance(sub, Mapping):
                    faults += size_faults(sub, value[name], _join(path, name))
    return faults


def measure(args: Mapping[str, Any], budget: int = MAX_ARGUMENT_VALUES) -> bool:
    """One walk of the arguments that refuses more than `budget` JSON values, and
    JSON payloads (`JSON_PAYLOADS`) nested more than `MAX_JSON_DEPTH` deep, naming the
    argument; returns whether a string or key may hold a lone surrogate (then
    `text_faults` finds where). Iterative: a hostile value cannot exhaust the stack."""
    count = 0
    odd_text = False
    for name, top in args.items():
        limit = MAX_JSON_DEPTH if name in JSON_PAYLOADS else MAX_JSON_DEPTH + 1
        stack: list[tuple[Any, int]] = [(top, 1)]
        while stack:
            item, depth = stack.pop()
            count += 1
            if isinstance(item, str):
                odd_text = odd_text or not item.isascii()
            elif isinstance(item, dict | list):
                if depth > limit:
                    raise errors.InvalidArgument(
                        f"{name} nests objects and arrays more than {limit} deep; flatten it",
                        reason=errors.Reason.REQUEST_LIMIT,
                        metadata={"field": name, "limit": str(limit)},
                    )
                if count + len(stack) + len(item) > budget:
                    stack.append((item, depth))  # over: refused below
                    break
                if isinstance(item, dict):
                    odd_text = odd_text or not all(str(key).isascii() for key in item)
                    stack.extend((child, depth + 1) for child in item.values())
                else:
                    stack.extend((child, depth + 1) for child in item)
        if stack:
            raise errors.InvalidArgument(
                f"the arguments hold more than {budget} JSON values (objects, arrays, "
                f"strings, numbers; {name} passed the count): send less, or fewer, larger "
                "values",
                reason=errors.Reason.REQUEST_LIMIT,
                metadata={"field": name, "limit": str(budget)},
            )
    return odd_text and _has_surrogate(args)


def _has_surrogate(value: Any) -> bool:
    # Only run when some text is not ASCII: JSON's dump finds lone surrogates in C.
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (TypeError, ValueError):
        return True  # not JSON-encodable as is: let text_faults look
    return False


def _fields(tool: Tool, schema_errors: Sequence[Any]) -> dict[str, str]:
    """A refusal's metadata: the tool, and the first argument its schema refused."""
    meta = {"tool": tool.name}
    if schema_errors:
        meta["field"] = ".".join(_where(schema_errors[0])) or "arguments"
    return meta


def _where(error: Any) -> list[str]:
    return [str(step) for step in error.path]


def _or(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def action_faults(tool: Tool, args: Mapping[str, Any]) -> list[str]:
    """What the arguments' action does not get as its `ActionRule` says: arguments it
    needs, one of a choice, arguments it does not take (named together, with those it
    takes). The schema is flat, so these are worded here rather than by the validator.
    """
    action = args.get("action")
    rule = tool.rules.get(action) if isinstance(action, str) else None
    if rule is None:  # no actions, or an unknown one: the schema's enum says so
        return []
    context = f"action {rule.action!r}"
    faults = []
    missing = [name for name in rule.required if name not in args]
    if missing:
        faults.append(f"{context} needs {', '.join(missing)}")
    given = [name for name in rule.one_of if name in args]
    got = f" (got {', '.join(given)})" if given else ""
    if rule.one_of and rule.one_of_required and len(given) != 1:
        faults.append(f"{context} needs exactly one of {_or(rule.one_of)}{got}")
    elif rule.one_of and len(given) > 1:
        faults.append(f"{context} takes at most one of {_or(rule.one_of)}{got}")
    properties = tool.input_schema["properties"]
    foreign = [n for n in args if n != "action" and n in properties and n not in rule.fields]
    if foreign:  # unknown names are the schema's (additionalProperties)
        faults.append(
            f"{context} does not take {', '.join(foreign)}; "
            f"it takes {', '.join(rule.fields) or 'nothing else'}"
        )
    return faults


def describe_fault(error: Any) -> str:
    """One argument fault, worded for a person; `where: message` for property faults."""
    where = ".".join(str(p) for p in error.path)
    message = error.message
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
