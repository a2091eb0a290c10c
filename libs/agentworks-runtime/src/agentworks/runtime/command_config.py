"""A command runner's config: a command per function, limits and network per target."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentworks.runtime.limits import Policy, parse_policies

# Runs a command given as a string (the shell form).
SHELL = "/bin/sh"


def parse_commands(spec: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Validate a `{function: argv list | command string}` mapping; a string becomes
    `/bin/sh -c <string>`."""
    commands: dict[str, tuple[str, ...]] = {}
    for name, command in spec.items():
        if isinstance(command, str):
            argv = (SHELL, "-c", command) if command.strip() else ()
        elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
            argv = tuple(command)
        else:
            raise ValueError(f"command for function {name!r} must be a list of strings or a string")
        if not argv:
            raise ValueError(f"command for function {name!r} is empty")
        commands[str(name)] = argv
    if not commands:
        raise ValueError("no commands configured: map at least one function name to a command")
    return commands


@dataclass(frozen=True)
class RunnerConfig:
    """A runner's command config: commands, and each target's limits and network (T7)."""

    commands: dict[str, tuple[str, ...]]
    policy: Policy = field(default_factory=Policy)
    targets: dict[str, Policy] = field(default_factory=dict)


def parse_runner_config(spec: Mapping[str, Any]) -> RunnerConfig:
    """A `{function: command}` mapping, or `{"commands": {...}, "limits": {...},
    "network": ..., "read_only": [...], "targets": {target: {...}}}` (`limits`)."""
    if not isinstance(spec.get("commands"), Mapping):  # a command is never an object
        return RunnerConfig(parse_commands(spec))
    unknown = set(spec) - {"commands", "limits", "network", "read_only", "targets"}
    if unknown:
        raise ValueError(f"the runner config has unknown settings {sorted(unknown)}")
    policy, targets = parse_policies(spec)
    return RunnerConfig(parse_commands(spec["commands"]), policy, targets)


def load_runner_config(source: str) -> RunnerConfig:
    """The runner config from a JSON file path, or from inline JSON (starting with `{`)."""
    text = source if source.lstrip().startswith("{") else pathlib.Path(source).read_text()
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"commands {source!r} are not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError("commands must be a JSON object mapping function names to commands")
    return parse_runner_config(spec)


def load_commands(source: str) -> dict[str, tuple[str, ...]]:
    """Commands from a JSON file path, or from inline JSON (starting with `{`)."""
    return load_runner_config(source).commands
