"""What common hosts' function calling takes as a tool's parameters (G2): the JSON Schema
subset OpenAI documents for function calling and Structured Outputs, checked for every
MCP tool the gateway publishes.

The subset, as OpenAI's "Supported schemas" states it: the root is an object (not
`anyOf`); the types are string, number, integer, boolean, object, array (and null);
strings take `pattern` and `format` (its listed formats), numbers `minimum`, `maximum`,
`exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, arrays `items` and `minItems`,
`maxItems`; objects `properties`, `required`, `additionalProperties`; any schema
`description`, `title`, `enum`, `const`. At most 10 levels of nesting, 5000 properties,
1000 enum values, 120,000 characters of property names, enum and const values. No
`allOf`, `oneOf`, `not`, `if`/`then`, `dependent*`, `propertyNames`, `minLength`,
`maxLength`, `minProperties`, `maxProperties`. (`anyOf` is in OpenAI's subset below the
root, but not in every host's; the gateway's schemas use none.) Strict mode alone also
wants every property required and `additionalProperties: false` on every object: the
gateway's tools have optional arguments, which hosts call in the default, non-strict
mode (the OpenAI Agents SDK converts MCP schemas to strict only when asked).
"""

from __future__ import annotations

from typing import Any

TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
ANY = frozenset({"type", "description", "title", "enum", "const"})
NUMBER = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
BY_TYPE = {
    "string": frozenset({"pattern", "format"}),
    "number": NUMBER,
    "integer": NUMBER,
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}
FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
MAX_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
MAX_SCHEMA_TEXT_CHARS = 120_000


def function_calling_faults(schema: Any) -> list[str]:
    """Why `schema` is not in the subset (see the module docstring); [] when it is."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return ["the root must be a schema of type object"]
    counts = {"properties": 0, "enum": 0, "chars": 0}
    faults = _faults(schema, "parameters", 1, counts)
    if counts["properties"] > MAX_PROPERTIES:
        faults.append(f"{counts['properties']} properties; at most {MAX_PROPERTIES}")
    if counts["enum"] > MAX_ENUM_VALUES:
        faults.append(f"{counts['enum']} enum values; at most {MAX_ENUM_VALUES}")
    if counts["chars"] > MAX_SCHEMA_TEXT_CHARS:
        faults.append(f"{counts['chars']} characters of names and values; at most 120000")
    return faults


def _faults(node: Any, where: str, depth: int, counts: dict[str, int]) -> list[str]:
    if not isinstance(node, dict):
        return [f"{where}: a schema must be an object"]
    if depth > MAX_DEPTH:
        return [f"{where}: nested deeper than {MAX_DEPTH} levels"]
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if kind is None or not set(kinds) <= TYPES:
        return [f"{where}: type must be one of {', '.join(sorted(TYPES))}, got {kind!r}"]
    allowed = ANY.union(*(BY_TYPE.get(str(k), frozenset()) for k in kinds))
    faults = [f"{where}: {key} is not supported" for key in node if key not in allowed]
    if "enum" in node:
        counts["enum"] += len(node["enum"])
        counts["chars"] += sum(len(str(value)) for value in node["enum"])
    if "format" in node and node["format"] not in FORMATS:
        faults.append(f"{where}: format {node['format']!r} is not supported")
    if "array" in kinds:
        if "items" not in node:
            faults.append(f"{where}: an array needs items")
        else:
            faults += _faults(node["items"], f"{where}.items", depth + 1, counts)
    properties = node.get("properties", {})
    counts["properties"] += len(properties)
    for name, sub in properties.items():
        counts["chars"] += len(name)
        faults += _faults(sub, f"{where}.{name}", depth + 1, counts)
    unknown = [name for name in node.get("required", ()) if name not in properties]
    if unknown:
        faults.append(f"{where}: required names {', '.join(unknown)}, not properties")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        faults += _faults(extra, f"{where}.additionalProperties", depth + 1, counts)
    elif extra is not None and not isinstance(extra, bool):
        faults.append(f"{where}: additionalProperties must be a boolean or a schema")
    return faults
