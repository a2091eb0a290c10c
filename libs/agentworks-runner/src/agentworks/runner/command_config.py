"""A command runner's config: a command per function and per target's turns, limits and
network per target.

    {"commands": {"summarize": ["python3", "/srv/tools/summarize.py"]},
     "turns": {"crew:demo": ["python3", "/srv/agent/chat.py"]},
     "limits": {...}, "network": "outbound", "read_only": [...], "targets": {...}}

`commands` maps a function name to the command each of its calls runs (R2); `turns`
maps a target (`crew:<name>`, `workflow:<id>`) to the command each of its turns runs
(L2). Either may be left out, not both. A bare `{function: command}` mapping is the
`commands` alone.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentworks.runner.limits import Policy, parse_policies

# Runs a command given as a string (the shell form).
SHELL = "/bin/sh"


def parse_commands(
    spec: Mapping[str, Any], *, what: str = "function", required: bool = True
) -> dict[str, tuple[str, ...]]:
    """Validate a `{function: argv list | command string}` mapping (`what`: "function",
    or "target" for turn commands); a string becomes `/bin/sh -c <string>`."""
    commands: dict[str, tuple[str, ...]] = {}
    for name, command in spec.items():
        if isinstance(command, str):
            argv = (SHELL, "-c", command) if command.strip() else ()
        elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
            argv = tuple(command)
        else:
            raise ValueError(f"command for {what} {name!r} must be a list of strings or a string")
        if not argv:
            raise ValueError(f"command for {what} {name!r} is empty")
        commands[str(name)] = argv
    if not commands and required:
        raise ValueError(f"no commands configured: map at least one {what} name to a command")
    return commands


def parse_turn_commands(spec: Any) -> dict[str, tuple[str, ...]]:
    """Validate `turns`: `{target: command}`, each target `crew:<name>` or
    `workflow:<id>`."""
    if not isinstance(spec, Mapping):
        raise ValueError('turns must be an object such as {"crew:demo": ["python3", "agent.py"]}')
    for target in spec:
        kind, sep, name = str(target).partition(":")
        if not sep or kind not in ("crew", "workflow") or not name:
            raise ValueError(f"turns entry {target!r} must name a target such as crew:<name>")
    return parse_commands(spec, what="target", required=False)


@dataclass(frozen=True)
class RunnerConfig:
    """A runner's command config: commands, and each target's limits and network (T7)."""

    commands: dict[str, tuple[str, ...]]
    policy: Policy = field(default_factory=Policy)
    targets: dict[str, Policy] = field(default_factory=dict)
    turns: dict[str, tuple[str, ...]] = field(default_factory=dict)  # target -> command


def parse_runner_config(spec: Mapping[str, Any]) -> RunnerConfig:
    """A `{function: command}` mapping, or `{"commands": {...}, "turns": {...},
    "limits": {...}, "network": ..., "read_only": [...], "targets": {target: {...}}}`
    (`limits`)."""
    full = isinstance(spec.get("commands"), Mapping) or isinstance(spec.get("turns"), Mapping)
    if not full:  # a command is never an object
        return RunnerConfig(parse_commands(spec))
    unknown = set(spec) - {"commands", "turns", "limits", "network", "read_only", "targets"}
    if unknown:
        raise ValueError(f"the runner config has unknown settings {sorted(unknown)}")
    policy, targets = parse_policies(spec)
    turns = parse_turn_commands(spec.get("turns", {}))
    commands = parse_commands(spec.get("commands", {}), required=not turns)
    return RunnerConfig(commands, policy, targets, turns)


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
