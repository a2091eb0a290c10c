"""Checking a declared JSON Schema (2020-12): storable, references, cycles, patterns (F1)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import referencing.jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import Unresolvable

from agentworks.core.checks import check_json_depth
from agentworks.core.errors import InvalidArgument, Reason
from agentworks_functions.patterns import (
    PatternError,
    compile_pattern,
    declared_patterns,
)
from agentworks_functions.schemas.cost import check_cost
from agentworks_functions.schemas.validation import _FORMATS, DRAFT_2020_12, check_storable


def _references(resource: Any, resolver: Any) -> Iterable[tuple[Any, str]]:
    """Every $ref / $dynamicRef of a schema, with the resolver of its scope."""
    contents = resource.contents
    if isinstance(contents, dict):
        for keyword in ("$ref", "$dynamicRef"):
            if isinstance(contents.get(keyword), str):
                yield resolver, contents[keyword]
    for sub in resource.subresources():
        yield from _references(sub, resolver.in_subresource(sub))


def _root_resolver(schema: dict[str, Any]) -> tuple[Any, Any]:
    """The declared schema as a resource, and the resolver of its root scope."""
    resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
    root = resource.id() or "urn:agentworks:declared-schema"
    return resource, METASCHEMAS.with_resource(root, resource).resolver(base_uri=root)


def _check_references(schema: dict[str, Any], field: str) -> None:
    """Every reference must resolve inside the schema (or to a metaschema): remote
    schemas are never fetched, so a URL cannot make the service read other hosts."""
    resource, resolver = _root_resolver(schema)
    for scope, ref in _references(resource, resolver):
        try:
            scope.lookup(ref)
        except Unresolvable:
            raise InvalidArgument(
                f"{field} has a $ref that cannot be resolved: {ref!r}; use references inside "
                "the schema (such as #/$defs/name) — remote schemas are never fetched",
                reason=Reason.INVALID_VALUE,
                metadata={"field": field, "ref": ref},
            ) from None


# Keywords that apply their subschemas to the same value (in place), and those that apply
# them to a part of it (a property, an item, a key). Validation follows references
# through both; a cycle of in-place ones never reaches a smaller value, so it never ends.
_IN_PLACE = {
    "$ref": "ref",
    "$dynamicRef": "ref",
    "allOf": "list",
    "anyOf": "list",
    "oneOf": "list",
    "not": "one",
    "if": "one",
    "then": "one",
    "else": "one",
    "dependentSchemas": "map",
}

_DESCENDING = {
    "properties": "map",
    "patternProperties": "map",
    "additionalProperties": "one",
    "unevaluatedProperties": "one",
    "propertyNames": "one",
    "prefixItems": "list",
    "items": "one",
    "contains": "one",
    "unevaluatedItems": "one",
}

# A schema as validation applies it: its contents, the resolver of its scope, and where
# it is (a JSON pointer into the declared schema, or the reference that led there).
_Node = tuple[Any, Any, str]


def _pointers(schema: Any) -> dict[int, str]:
    """The JSON pointer of every object and array in the declared schema, by identity."""
    found: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(schema, "#")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict | list):
            found.setdefault(id(item), where)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                part = str(key).replace("~", "~0").replace("/", "~1")
                stack.append((child, f"{where}/{part}"))
    return found


def _applied(node: _Node, keywords: dict[str, str], where: dict[int, str]) -> Iterator[_Node]:
    """The schemas `node` applies through `keywords`, each with the resolver of its scope."""
    contents, resolver, _ = node
    for keyword, shape in keywords.items():
        value = contents.get(keyword)
        if shape == "ref":
            if not isinstance(value, str):
                continue
            try:
                resolved = resolver.lookup(value)
            except Unresolvable:  # reported by validation itself
                continue
            label = where.get(id(resolved.contents), f"{keyword} {value!r}")
            yield resolved.contents, resolved.resolver, label
            continue
        if shape == "one":
            children = [value]
        elif shape == "list":
            children = value if isinstance(value, list) else []
        else:
            children = list(value.values()) if isinstance(value, dict) else []
        for child in children:
            if isinstance(child, dict):  # true and false apply nothing further
                sub = referencing.jsonschema.DRAFT202012.create_resource(child)
                yield child, resolver.in_subresource(sub), where.get(id(child), keyword)


def _check_reference_cycles(schema: dict[str, Any], field: str) -> None:
    """Refuse references that lead back to a schema without descending into the value:
    validation would follow them forever (a RecursionError at every call).

    A depth-first walk along the in-place keywords, started at every schema validation
    can reach; reaching a schema that is still on the walk's path closes a cycle.
    """
    _, resolver = _root_resolver(schema)
    where = _pointers(schema)
    done: set[int] = set()  # schemas whose in-place walk found no cycle
    starts: list[_Node] = [(schema, resolver, "#")]
    while starts:
        start = starts.pop()
        if id(start[0]) in done:
            continue
        path: list[_Node] = [start]
        on_path = {id(start[0]): 0}
        walks = [_applied(start, _IN_PLACE, where)]
        starts.extend(_applied(start, _DESCENDING, where))
        while walks:
            node = next(walks[-1], None)
            if node is None:
                walks.pop()
                finished = path.pop()
                del on_path[id(finished[0])]
                done.add(id(finished[0]))
                continue
            if not isinstance(node[0], dict) or id(node[0]) in done:
                continue
            if id(node[0]) in on_path:
                cycle = " → ".join(n[2] for n in [*path[on_path[id(node[0])] :], node])
                raise InvalidArgument(
                    f"{field} has references that loop forever: {cycle}. Validation would "
                    "never end: a chain of $ref that comes back to a schema must first "
                    "apply to a part of the value (through properties, items, ...)",
                    reason=Reason.INVALID_VALUE,
                    metadata={"field": field},
                )
            on_path[id(node[0])] = len(path)
            path.append(node)
            walks.append(_applied(node, _IN_PLACE, where))
            starts.extend(_applied(node, _DESCENDING, where))


def _check_patterns(schema: dict[str, Any], field: str) -> None:
    """Every pattern must compile with RE2, small enough to match in bounded time."""
    for where, pattern in declared_patterns(schema):
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise InvalidArgument(
                f"{field} at {where}: the pattern {pattern!r} cannot be used: {exc}",
                reason=Reason.INVALID_VALUE,
                metadata={"field": field, "at": where},
            ) from None


def check_schema(schema: Any, field: str, *, require_object: bool) -> dict[str, Any]:
    """Check a declared schema against the 2020-12 metaschema (F1)."""
    if not isinstance(schema, dict):
        raise InvalidArgument(
            f"{field} must be a JSON object (a JSON Schema 2020-12 document)",
            reason=Reason.MALFORMED,
            metadata={"field": field},
        )
    check_json_depth(schema, field)
    check_storable(schema, field)
    declared = schema.get("$schema")
    if declared is not None and (
        not isinstance(declared, str) or declared.rstrip("#") != DRAFT_2020_12
    ):
        raise InvalidArgument(
            f"{field} declares $schema {declared!r}; only JSON Schema 2020-12 "
            f"({DRAFT_2020_12}) is supported — remove $schema or use that URI",
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        )
    _check_patterns(schema, field)
    try:
        Draft202012Validator.check_schema(schema, format_checker=_FORMATS)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise InvalidArgument(
            f"{field} is not a valid JSON Schema 2020-12 at {where}: {exc.message}",
            reason=Reason.INVALID_VALUE,
            metadata={"field": field, "at": where},
        ) from None
    if require_object and schema.get("type") != "object":
        raise InvalidArgument(
            f'{field} must describe an object ("type": "object"): inputs are named fields',
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        )
    _check_references(schema, field)
    _check_reference_cycles(schema, field)
    check_cost(closed_inputs(schema) if require_object else schema, field)
    return schema


def closed_inputs(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as it is enforced: inputs it does not name are refused (F3).

    JSON Schema accepts properties it does not mention unless told otherwise, so a
    top level that says nothing about them gets `"unevaluatedProperties": false`: a key
    is known when `properties`, `patternProperties` or a subschema (`allOf`, `$ref`,
    `if`/`then`, ...) evaluates it. An owner who wants open inputs says so with
    `"additionalProperties": true` (or a schema for them).
    """
    if "additionalProperties" in schema or "unevaluatedProperties" in schema:
        return schema
    return {**schema, "unevaluatedProperties": False}
