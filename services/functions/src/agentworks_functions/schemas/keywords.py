"""JSON Schema keywords applied in place of jsonschema's own (`PatternValidator`).

- `pattern`, `patternProperties`, `additionalProperties` and `unevaluatedProperties`
  match with RE2 (`patterns.search`, linear time, within the validation's match budget)
  instead of Python's backtracking `re`;
- `uniqueItems` hashes each item once (`_unique_items`): jsonschema compares items
  pairwise, in quadratic time, when they do not sort (objects);
- `enum` is one hash of the value, `const` counts the nodes it compares, `properties`
  and `required` the names they look up;
- every keyword applied, every descent into a subschema and every new validator for one
  counts against the validation's step budget (`patterns.step`, `STEP_BUDGET`).

The budgets themselves, and why they exist, are described in `patterns`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema._utils import equal
from jsonschema.exceptions import ValidationError

from agentworks_functions.patterns import (
    DESCEND_STEPS,
    PatternError,
    json_nodes,
    matches_any,
    search,
    step,
)

# The same as jsonschema's own (jsonschema/_keywords.py, _utils.py, MIT licence), with
# `search` in place of `re.search`. A pattern that cannot be used (declared before
# patterns were checked) is a violation, not an internal error.


def extras_msg(extras: list[Any]) -> tuple[str, str]:
    verb = "was" if len(extras) == 1 else "were"
    return ", ".join(repr(extra) for extra in extras), verb


def _unexpected(message: str, keys: Iterable[str]) -> ValidationError:
    """A refusal of properties; `.unexpected` lists them (for `schemas.violations`)."""
    error = ValidationError(message)
    error.unexpected = sorted(keys, key=str)  # type: ignore[attr-defined]
    return error


def _unusable(pattern: str, exc: PatternError) -> ValidationError:
    return ValidationError(f"the schema's pattern {pattern!r} cannot be used: {exc}")


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = search(pattern, instance)
    except PatternError as exc:
        yield _unusable(pattern, exc)
        return
    if not found:
        shown = (
            repr(instance)
            if len(instance) <= 100
            else f"{instance[:80]!r}... ({len(instance)} characters)"
        )
        yield ValidationError(f"{shown} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                found = search(pattern, key)
            except PatternError as exc:
                yield _unusable(pattern, exc)
                return
            if found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    for key in instance:
        if key not in properties and not matches_any(patterns, key):
            yield key


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator:
    if not validator.is_type(instance, "object"):
        return
    try:
        extras = set(_additional(instance, schema))
    except PatternError as exc:
        yield ValidationError(f"the schema's patternProperties cannot be used: {exc}")
        return
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield _unexpected(f"{joined} {verb} not match any of the regexes: {patterns}", extras)
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield _unexpected(error % extras_msg(sorted(extras, key=str)), extras)


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Any, schema: Any) -> list[str]:
    """The keys of `instance` that `schema` evaluates (for unevaluatedProperties)."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = []
    for keyword in ("$ref", "$dynamicRef"):
        reference = schema.get(keyword)
        if reference is not None:
            resolved = validator._resolver.lookup(reference)
            keys += _evaluated_keys(
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                instance,
                resolved.contents,
            )
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        subschema = schema.get(keyword)
        if subschema is not None:
            keys += (k for k, v in instance.items() if _valid(validator.descend(v, subschema)))
    if "patternProperties" in schema:
        keys += (k for k in instance if matches_any(schema["patternProperties"], k))
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            keys += _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    try:
        evaluated = set(_evaluated_keys(validator, instance, schema))
    except PatternError as exc:
        yield ValidationError(f"the schema's patternProperties cannot be used: {exc}")
        return
    rejected = []
    for key in instance:
        if key not in evaluated:
            for _ in validator.descend(instance[key], unevaluated, path=key, schema_path=key):
                rejected.append(key)
    if rejected:
        if unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield _unexpected(error % extras_msg(sorted(rejected, key=str)), rejected)
        else:
            error = (
                "Unevaluated properties are not valid under the given schema "
                "(%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % extras_msg(rejected))


def _identity(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal exactly when JSON Schema calls two
    values equal: 1 and 1.0 alike, true and 1 not, objects whatever their key order."""
    return _counted_identity(value, [-1])


class _TooLarge(Exception):
    """A value has more nodes than the limit given to `_counted_identity`."""


def _counted_identity(value: Any, left: list[int]) -> Any:
    """`_identity`, counting each node against `left[0]` (when it is not negative: past
    it, _TooLarge) and against the step budget (a node is one step: B1)."""
    if left[0] >= 0:
        left[0] -= 1
        if left[0] < 0:
            raise _TooLarge
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    step(1 + len(value) if isinstance(value, dict | list | tuple) else 1)
    if isinstance(value, dict):
        return ("object", frozenset((k, _counted_identity(v, left)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("array", tuple(_counted_identity(v, left) for v in value))
    return ("other", repr(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`uniqueItems` in linear time. jsonschema compares every pair of items that do not
    sort (objects): 1,000 objects took seconds, 20,000 (256 KiB of inputs) hours, all
    the while holding the service's event loop. Each item is hashed once, each of its
    nodes one step of the budget."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: dict[Any, int] = {}
    unlimited = [-1]
    for index, item in enumerate(instance):
        first = seen.setdefault(_counted_identity(item, unlimited), index)
        if first != index:
            yield ValidationError(
                f"items [{first}] and [{index}] are equal; the items must be unique"
            )
            return


# An enum's members as a set (by identity of the schema's list, kept alive beside it):
# membership is one hash of the value, whatever the enum's size (B1).
_ENUM_SETS: dict[int, tuple[Any, frozenset[Any], int]] = {}
_ENUM_SETS_KEPT = 4096
# How much of a refused value or of an enum a message quotes.
_QUOTED = 120


def _enum_set(enums: list[Any]) -> tuple[frozenset[Any], int]:
    """The members of `enums` as identities, and the most nodes one of them has."""
    kept = _ENUM_SETS.get(id(enums))
    if kept is None or kept[0] is not enums:
        if len(_ENUM_SETS) >= _ENUM_SETS_KEPT:
            _ENUM_SETS.clear()
        members = frozenset(_counted_identity(each, [-1]) for each in enums)
        largest = max((json_nodes(each) for each in enums), default=0)
        kept = _ENUM_SETS[id(enums)] = (enums, members, largest)
    return kept[1], kept[2]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTED else text[: _QUOTED - 3] + "..."


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`enum` as one hash of the value (at most as many nodes as the largest member),
    not a comparison with each member; its message quotes the value and the enum in
    part (jsonschema's quoted the whole enum once per refused item: gigabytes)."""
    if not isinstance(enums, list):
        return
    members, largest = _enum_set(enums)
    try:
        found = _counted_identity(instance, [largest]) in members
    except _TooLarge:
        found = False
    if not found:
        listed = _shown(enums)
        yield ValidationError(
            f"{_shown(instance)} is not one of {listed}"
            + (f" ({len(enums)} values)" if len(listed) > _QUOTED - 4 else "")
        )


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`const`, counted by the nodes it compares (at most the smaller value's)."""
    step(min(json_nodes(const), 1 + (len(instance) if isinstance(instance, dict | list) else 0)))
    if not equal(instance, const):
        yield ValidationError(f"{_shown(const)} was expected")


def _properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`properties`, counted by the properties it looks up."""
    if not validator.is_type(instance, "object"):
        return
    step(len(properties))
    for name, subschema in properties.items():
        if name in instance:
            yield from validator.descend(instance[name], subschema, path=name, schema_path=name)


def _required(validator: Any, required: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """`required`, counted by the names it looks up."""
    if not validator.is_type(instance, "object"):
        return
    step(len(required))
    for name in required:
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property")


def _counted(keyword: Any) -> Any:
    """`keyword`'s validator function, each application counted against the step budget."""

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        step()
        return keyword(validator, value, instance, schema)

    return counted


PatternValidator = validators.extend(
    Draft202012Validator,
    {
        name: _counted(keyword)
        for name, keyword in {
            **Draft202012Validator.VALIDATORS,
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
            "unevaluatedProperties": _unevaluated_properties,
            "uniqueItems": _unique_items,
            "enum": _enum,
            "const": _const,
            "properties": _properties,
            "required": _required,
        }.items()
    },
)
_descend = PatternValidator.descend


def _descend_with_false_paths(
    self: Any,
    instance: Any,
    schema: Any,
    path: Any = None,
    schema_path: Any = None,
    resolver: Any = None,
) -> Iterator[ValidationError]:
    """jsonschema's `descend`, except that a `false` subschema's refusal keeps the place
    it was applied at (`{"properties": {"x": false}}` refuses `inputs.x`, not `inputs`):
    jsonschema returns that error before adding `path` and `schema_path`."""
    step(DESCEND_STEPS)  # a descent (and a $ref's lookup) costs several keywords' time
    if schema is not False:
        yield from _descend(self, instance, schema, path, schema_path, resolver)
        return
    error = ValidationError(
        f"False schema does not allow {instance!r}",
        validator=None,
        validator_value=None,
        instance=instance,
        schema=schema,
    )
    if path is not None:
        error.path.appendleft(path)
    if schema_path is not None:
        error.schema_path.appendleft(schema_path)
    yield error


PatternValidator.descend = _descend_with_false_paths  # this class only, not jsonschema's
_evolve = PatternValidator.evolve


def _counted_evolve(self: Any, **changes: Any) -> Any:
    """jsonschema's `evolve` (a new validator per subschema: `contains`, `$ref`), counted."""
    step(DESCEND_STEPS)
    return _evolve(self, **changes)


PatternValidator.evolve = _counted_evolve
