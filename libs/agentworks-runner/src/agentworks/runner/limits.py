"""What one execution of the command runner may use, per target (T7).

A runner's command config (`runner.load_runner_config`) states limits and the network
for all its targets and, under `targets`, for one target at a time:

    {"commands": {"summarize": ["python3", "/srv/tools/summarize.py"]},
     "limits": {"wall_seconds": 600, "memory_bytes": "1GiB"},
     "network": "outbound",
     "read_only": ["/srv/tools"],
     "targets": {"crew:reports": {"limits": {"processes": 32}, "network": "none"}}}

A target's settings are the defaults below, then the top-level ones, then its own.
Past a limit the execution ends `failed` with an error naming the limit
(`LimitExceeded`); the sandbox is ended at once, every process in it included. How each
limit is kept (`watch.Watch`, `sandbox.Sandbox`):

- `wall_seconds` (default 3600): the runner's clock.
- `cpu_seconds` (3600): the runner adds up the CPU time of the execution's processes
  (every 0.2 s, and the command's own total when it ends); RLIMIT_CPU per process too.
- `memory_bytes` (2 GiB): a memory cgroup of the execution when the runner may make one
  (the kernel's OOM killer, its kills counted); else RLIMIT_AS per process and the
  runner adding up resident memory.
- `processes` (256, processes and threads at once): RLIMIT_NPROC in the execution's own
  user namespace (there it counts only that execution's) and the runner counting them;
  reaching it ends the execution.
- `open_files` (1024 per process): RLIMIT_NOFILE, and the runner counting descriptors;
  reaching it ends the execution.
- `output_bytes` (1 GiB): the runner adding up the output folder (every 0.2 s and at the
  end); RLIMIT_FSIZE per file; also the most the call's files may total on upload (T8).

`network` is `outbound` (the default: agents call model APIs; the sandbox shares the
runner's network) or `none` (a network namespace of its own with only loopback).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentworks.runtime.sizes import GIB as GIB
from agentworks.runtime.sizes import KIB as KIB
from agentworks.runtime.sizes import MIB as MIB
from agentworks.runtime.sizes import size_text as size_text

NETWORKS = ("outbound", "none")


@dataclass(frozen=True)
class Limits:
    """Per-execution limits (T7); see the module docstring for how each is kept."""

    wall_seconds: float = 3600
    cpu_seconds: float = 3600
    memory_bytes: int = 2 * GIB
    processes: int = 256
    open_files: int = 1024
    output_bytes: int = 1 * GIB


# The smallest values that still let a command start (the sandbox's own init takes some).
MINIMUMS = {
    "wall_seconds": 1,
    "cpu_seconds": 1,
    "memory_bytes": 32 * MIB,
    "processes": 4,
    "open_files": 16,
    "output_bytes": 1 * KIB,
}
MAXIMUMS = {
    "wall_seconds": 7 * 24 * 3600,
    "cpu_seconds": 7 * 24 * 3600,
    "memory_bytes": 1024 * GIB,
    "processes": 100_000,
    "open_files": 1_048_576,
    "output_bytes": 1024 * GIB,
}


@dataclass(frozen=True)
class Policy:
    """What one target's executions get: limits, network, extra read-only paths."""

    limits: Limits = Limits()
    network: str = "outbound"
    read_only: tuple[str, ...] = ()


class LimitExceeded(Exception):
    """An execution passed one of its limits; the message names it."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def seconds_text(value: float) -> str:
    return f"{value:g} s"


def exceeded(limit: str, limits: Limits, detail: str = "") -> LimitExceeded:
    """The error for passing `limit` (a `Limits` field name)."""
    shown = {
        "wall_seconds": ("wall time", seconds_text(limits.wall_seconds)),
        "cpu_seconds": ("CPU time", f"{seconds_text(limits.cpu_seconds)} of CPU"),
        "memory_bytes": ("memory", size_text(limits.memory_bytes)),
        "processes": ("process", f"{limits.processes} processes and threads at once"),
        "open_files": ("open files", f"{limits.open_files} in one process"),
        "output_bytes": (
            "output",
            f"{size_text(limits.output_bytes)} in the output folder",
        ),
    }[limit]
    name, value = shown
    text = f"the execution passed its {name} limit ({value})"
    return LimitExceeded(name, text + (f": {detail}" if detail else "") + "; it was stopped")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(value: Any, field: str) -> int:
    """Bytes from an integer or a text such as `64MiB`, `1G`, `512 KiB` (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number of bytes or a size such as 64MiB")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and (match := _SIZE.match(value)):
        unit = {"": 1, "K": KIB, "M": MIB, "G": GIB}[match.group(2).upper()]
        return int(float(match.group(1)) * unit)
    raise ValueError(f"{field} must be a number of bytes or a size such as 64MiB, got {value!r}")


def _number(value: Any, field: str, *, whole: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field} must be a number, got {value!r}")
    if whole and value != int(value):
        raise ValueError(f"{field} must be a whole number, got {value!r}")
    return int(value) if whole else float(value)


def parse_limits(spec: Any, base: Limits, where: str) -> Limits:
    """`base` with the limits in `spec` (a mapping of `Limits` field names) applied."""
    if spec is None:
        return base
    if not isinstance(spec, Mapping):
        raise ValueError(f'{where}limits must be an object such as {{"wall_seconds": 600}}')
    fields = {f.name for f in dataclasses.fields(Limits)}
    changes: dict[str, Any] = {}
    for name, value in spec.items():
        field = f"{where}limits.{name}"
        if name not in fields:
            raise ValueError(f"{field} is not a limit; the limits are {sorted(fields)}")
        if name.endswith("_bytes"):
            number: float = parse_size(value, field)
        else:
            number = _number(value, field, whole=name in ("processes", "open_files"))
        low, high = MINIMUMS[name], MAXIMUMS[name]
        if not low <= number <= high:
            raise ValueError(f"{field} must be {low}-{high}, got {number}")
        changes[name] = number
    return dataclasses.replace(base, **changes)


def parse_policy(spec: Mapping[str, Any], base: Policy, where: str = "") -> Policy:
    """`base` with the `limits`, `network` and `read_only` of `spec` applied."""
    limits = parse_limits(spec.get("limits"), base.limits, where)
    network = spec.get("network", base.network)
    if network not in NETWORKS:
        raise ValueError(f"{where}network must be one of {list(NETWORKS)}, got {network!r}")
    read_only = spec.get("read_only", [])
    if not isinstance(read_only, list | tuple) or not all(
        isinstance(p, str) and p.startswith("/") for p in read_only
    ):
        raise ValueError(f"{where}read_only must be a list of absolute paths")
    return Policy(limits=limits, network=network, read_only=(*base.read_only, *read_only))


def parse_policies(spec: Mapping[str, Any]) -> tuple[Policy, dict[str, Policy]]:
    """The default policy and each target's, from a runner config's top level and its
    `targets` object."""
    default = parse_policy(spec, Policy())
    targets = spec.get("targets") or {}
    if not isinstance(targets, Mapping):
        raise ValueError('targets must be an object such as {"crew:x": {"network": "none"}}')
    per_target: dict[str, Policy] = {}
    for target, target_spec in targets.items():
        kind, sep, name = str(target).partition(":")
        if not sep or kind not in ("crew", "workflow") or not name:
            raise ValueError(f"targets entry {target!r} must look like crew:<name>")
        if not isinstance(target_spec, Mapping):
            raise ValueError(f"targets.{target} must be an object")
        unknown = set(target_spec) - {"limits", "network", "read_only"}
        if unknown:
            raise ValueError(f"targets.{target} has unknown settings {sorted(unknown)}")
        per_target[str(target)] = parse_policy(target_spec, default, f"targets.{target}.")
    return default, per_target
