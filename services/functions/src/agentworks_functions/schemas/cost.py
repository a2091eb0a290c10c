"""A declared schema's static cost bound (B1): the most steps checking one JSON value of an
input can take, at the worst place in the input, whatever the input.

Validation applies a schema's keywords to a value, then its subschemas: in place (`allOf`,
`anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `$ref`, `dependentSchemas`) to the same value,
and descending (`properties`, `items`, `contains`, ...) to its parts. The steps spent on one
value of the input are at most `cost[k]` for a value `k` levels down, where

    cost(s)[k] = own(s) [k = 0]  +  the in-place subschemas' cost[k]
                 + the most any one part can receive from the descending ones, cost[k-1]

counting each keyword as the runtime budget does (schemas.keywords: a keyword one step, a
descent `DESCEND_STEPS`, `enum` one hash of at most its largest member, `const` its
nodes, `properties` and `required` their names). `unevaluatedProperties` and
`unevaluatedItems` evaluate the in-place subschemas a second time.

A whole check costs at most (values in the input) x `value_cost(schema)`. Nested
combinators multiply: `anyOf` of two `$ref`s to the next level, 17 levels deep, costs
2^17 descents for one value. A schema whose bound passes `MAX_VALUE_STEPS` is refused at
declaration, naming the keyword where the cost passed it; the bound also decides where
a check runs (in place, or in the check pool: `schemas.pool`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import Unresolvable

from agentworks.core.errors import InvalidArgument, Reason
from agentworks.core.limits import MAX_JSON_DEPTH
from agentworks_functions.patterns import DESCEND_STEPS, STEP_BUDGET, json_nodes

# The most steps checking one value of an input may cost by a schema's static bound: a
# check within its budget (STEP_BUDGET) reaches at least 100 values.
MAX_VALUE_STEPS = STEP_BUDGET // 100

_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if")
_REFS = ("$ref", "$dynamicRef")
# Keywords that are not checks (no step at validation).
_NOT_CHECKS = frozenset(
    {
        "$schema", "$id", "$anchor", "$dynamicAnchor", "$comment", "$defs", "definitions",
        "$vocabulary", "title", "description", "default", "examples", "deprecated",
        "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
    }
)  # fmt: skip


class _Bound:
    """The layered cost of every schema node of one declared schema (memoised)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
        root = resource.id() or "urn:agentworks:declared-schema"
        self.resolver = METASCHEMAS.with_resource(root, resource).resolver(base_uri=root)
        self.schema = schema
        self.memo: dict[tuple[int, int], int] = {}
        self.keep: list[Any] = []  # resolved schemas stay alive while their ids are keys
        self.culprit: tuple[str, int] | None = None
        self.culprit_node: Any = None

    def _resolve(self, reference: str, resolver: Any) -> tuple[Any, Any] | None:
        try:
            resolved = resolver.lookup(reference)
        except Unresolvable:
            return None
        self.keep.append(resolved.contents)
        return resolved.contents, resolved.resolver

    def _child(self, child: Any, resolver: Any) -> tuple[Any, Any]:
        if isinstance(child, dict):
            sub = referencing.jsonschema.DRAFT202012.create_resource(child)
            return child, resolver.in_subresource(sub)
        return child, resolver

    def cost(self, node: Any, resolver: Any, depth: int) -> int:
        """The most steps `node` spends on one value `depth` levels below where it applies."""
        if not isinstance(node, dict) or depth < 0:
            return 0
        key = (id(node), depth)
        found = self.memo.get(key)
        if found is not None:
            return found
        self.memo[key] = 0  # (in-place cycles are refused before; this only ends one)
        total = self._own(node) if depth == 0 else 0
        biggest = ("", 0)
        in_place = 0
        for keyword in _IN_PLACE_LISTS:
            for child in node.get(keyword) or [] if isinstance(node.get(keyword), list) else []:
                part = DESCEND_STEPS + self.cost(*self._child(child, resolver), depth)
                in_place += part
                biggest = max(biggest, (keyword, part), key=lambda kv: kv[1])
        for keyword in _IN_PLACE_ONE:
            if keyword in node:
                part = DESCEND_STEPS + self.cost(*self._child(node[keyword], resolver), depth)
                in_place += part
                biggest = max(biggest, (keyword, part), key=lambda kv: kv[1])
        if "then" in node or "else" in node:
            part = DESCEND_STEPS + max(
                self.cost(*self._child(node.get("then"), resolver), depth),
                self.cost(*self._child(node.get("else"), resolver), depth),
            )
            in_place += part
        for keyword in _REFS:
            if isinstance(node.get(keyword), str):
                resolved = self._resolve(node[keyword], resolver)
                if resolved is not None:
                    part = DESCEND_STEPS + self.cost(*resolved, depth)
                    in_place += part
                    biggest = max(biggest, (keyword, part), key=lambda kv: kv[1])
        if isinstance(node.get("dependentSchemas"), dict):
            for child in node["dependentSchemas"].values():
                in_place += DESCEND_STEPS + self.cost(*self._child(child, resolver), depth)
        if "unevaluatedProperties" in node or "unevaluatedItems" in node:
            in_place *= 2  # the in-place subschemas are evaluated again to find what they cover
        total += in_place
        if depth > 0:
            below = max(self._object_part(node, resolver, depth - 1), self._array_part(
                node, resolver, depth - 1
            ))  # fmt: skip
            total += below
        self.memo[key] = total
        if total > MAX_VALUE_STEPS and self.culprit is None:
            self.culprit = (biggest[0] or _costliest_keyword(node), total)
            self.culprit_node = node
        return total

    def _object_part(self, node: dict[str, Any], resolver: Any, depth: int) -> int:
        def each(child: Any) -> int:
            return DESCEND_STEPS + self.cost(*self._child(child, resolver), depth)

        named = node.get("properties")
        one = max((each(c) for c in named.values()), default=0) if isinstance(named, dict) else 0
        if "additionalProperties" in node:
            one = max(one, each(node["additionalProperties"]))
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            one += sum(each(c) for c in patterns.values())
        for keyword in ("unevaluatedProperties", "propertyNames"):
            if keyword in node:
                one += each(node[keyword])
        if "unevaluatedProperties" in node and "additionalProperties" in node:
            one += each(node["additionalProperties"])  # evaluated again, as above
        return one

    def _array_part(self, node: dict[str, Any], resolver: Any, depth: int) -> int:
        def each(child: Any) -> int:
            return DESCEND_STEPS + self.cost(*self._child(child, resolver), depth)

        prefix = node.get("prefixItems")
        one = max((each(c) for c in prefix), default=0) if isinstance(prefix, list) else 0
        if "items" in node:
            one = max(one, each(node["items"]))
        for keyword in ("contains", "unevaluatedItems"):
            if keyword in node:
                one += each(node[keyword])
        return one

    def _own(self, node: dict[str, Any]) -> int:
        steps = 0
        for keyword, value in node.items():
            if keyword in _NOT_CHECKS:
                continue
            steps += 1
            if keyword == "enum" and isinstance(value, list):
                steps += max((json_nodes(each) for each in value), default=0)
            elif keyword == "const":
                steps += json_nodes(value)
            elif keyword in ("properties", "required", "dependentRequired") and isinstance(
                value, dict | list
            ):
                steps += len(value)
        return steps


def _costliest_keyword(node: dict[str, Any]) -> str:
    for keyword in ("enum", "const", "properties", "required", "dependentRequired"):
        if keyword in node:
            return keyword
    return next(iter(node), "?")


def _pointer(schema: Any, target: Any) -> str:
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        item, where = stack.pop()
        if item is target:
            return where or "(root)"
        if isinstance(item, dict | list):
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                stack.append((child, f"{where}/{key}" if where else str(key)))
    return "a referenced schema"


def _bound(schema: dict[str, Any]) -> tuple[int, str | None]:
    bound = _Bound(schema)
    worst = 0
    try:
        for depth in range(MAX_JSON_DEPTH + 1):
            worst = max(worst, bound.cost(schema, bound.resolver, depth))
    except RecursionError:
        return MAX_VALUE_STEPS + 1, "$ref (references nest too deep to bound)"
    if bound.culprit is None:
        return worst, None
    keyword, _ = bound.culprit
    return worst, f"{_pointer(schema, bound.culprit_node)}/{keyword}".removeprefix("(root)/")


@functools.lru_cache(maxsize=256)
def _value_cost(key: str) -> int:
    return _bound(json.loads(key))[0]


def value_cost(schema: dict[str, Any]) -> int:
    """The most steps checking one value of an input against `schema` may cost (cached by
    the schema's canonical JSON)."""
    return _value_cost(json.dumps(schema, sort_keys=True, separators=(",", ":")))


def check_cost(schema: dict[str, Any], field: str) -> int:
    """Refuse a schema whose static cost bound passes MAX_VALUE_STEPS, naming the keyword."""
    worst, where = _bound(schema)
    if worst > MAX_VALUE_STEPS:
        raise InvalidArgument(
            f"{field} at {where or '(root)'}: checking one value of an input could cost "
            f"{worst:,} steps by this schema; the limit is {MAX_VALUE_STEPS:,} steps per value "
            "(nested anyOf/oneOf/allOf/$ref multiply the cost level by level; a large const "
            "or enum member costs its size). Flatten the schema or use fewer alternatives",
            reason=Reason.CHECK_BUDGET,
            metadata={"field": field, "at": where or "(root)", "limit": str(MAX_VALUE_STEPS)},
        )
    return worst
