"""Targets (C1): the crews and workflows that messages, turns and functions belong to."""

from __future__ import annotations

from dataclasses import dataclass

from agentworks.core.checks import check_lower_case
from agentworks.core.errors import InvalidArgument

KINDS = ("crew", "workflow")


@dataclass(frozen=True)
class TargetKey:
    kind: str  # "crew" | "workflow"
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def check_target(kind: str, name: str) -> TargetKey:
    """A target's kind and name as a key, or InvalidArgument saying what is wrong. The
    name's shape is the proto's rule (`TargetRef.name`'s pattern), checked before the
    handler on every request that names a target."""
    if kind not in KINDS:
        raise InvalidArgument("target.kind must be crew or workflow")
    return TargetKey(kind, name)


def check_new_target(kind: str, name: str, field: str = "target.name") -> TargetKey:
    """A target being registered: as `check_target`, and lower-case (B10)."""
    key = check_target(kind, name)
    check_lower_case(name, field)
    return key
