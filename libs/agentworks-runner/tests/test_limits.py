"""The command runner's config: limits, network and read-only paths per target (T7)."""

from __future__ import annotations

import json

import pytest

from agentworks.runner.limits import GIB, KIB, MIB, Limits, Policy, exceeded, parse_size
from agentworks.runner.runner import load_runner_config, parse_runner_config


def test_limits_and_network_come_from_the_config_per_target_over_stated_defaults_T7(tmp_path):
    """T7: a flat `{function: command}` config gets the stated defaults; `limits`,
    `network` and `read_only` at the top apply to every target, a target's own on top."""
    flat = parse_runner_config({"hello": "echo hi"})
    assert flat.policy == Policy() and flat.targets == {}
    assert Limits() == Limits(3600, 3600, 2 * GIB, 256, 1024, 1 * GIB)
    assert Policy().network == "outbound"
    spec = {
        "commands": {"hello": ["echo", "hi"]},
        "limits": {"wall_seconds": 60, "memory_bytes": "512MiB"},
        "network": "none",
        "read_only": ["/opt/tools"],
        "targets": {
            "crew:a": {"limits": {"processes": 8, "output_bytes": "10 KiB"}},
            "crew:b": {"network": "outbound", "read_only": ["/opt/b"]},
        },
    }
    path = tmp_path / "runner.json"
    path.write_text(json.dumps(spec))
    config = load_runner_config(str(path))
    assert config.commands == {"hello": ("echo", "hi")}
    assert config.policy == Policy(
        Limits(wall_seconds=60, memory_bytes=512 * MIB), "none", ("/opt/tools",)
    )
    assert config.targets["crew:a"].limits == Limits(
        wall_seconds=60, memory_bytes=512 * MIB, processes=8, output_bytes=10 * KIB
    )
    assert config.targets["crew:a"].network == "none"
    assert config.targets["crew:b"] == Policy(
        config.policy.limits, "outbound", ("/opt/tools", "/opt/b")
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"limits": {"memory": 5}}, "limits.memory is not a limit"),
        ({"limits": {"processes": 2}}, "limits.processes must be 4-100000, got 2"),
        ({"limits": {"processes": 4.5}}, "limits.processes must be a whole number"),
        ({"limits": {"memory_bytes": "lots"}}, "limits.memory_bytes must be a number of bytes"),
        ({"network": "some"}, "network must be one of ['outbound', 'none']"),
        ({"read_only": ["relative"]}, "read_only must be a list of absolute paths"),
        ({"targets": {"x": {}}}, "targets entry 'x' must look like crew:<name>"),
        ({"targets": {"crew:x": {"limit": {}}}}, "targets.crew:x has unknown settings"),
        ({"targets": {"crew:x": {"limits": {"wall_seconds": 0}}}}, "targets.crew:x.limits."),
        ({"sandbox": "none"}, "the runner config has unknown settings ['sandbox']"),
    ],
)
def test_a_bad_limit_or_network_is_refused_naming_the_setting_T7(spec, says):
    """T7: a limit that is not one, out of its range or not a number, a network other than
    outbound or none, relative read-only paths and bad targets are refused, naming them."""
    with pytest.raises(ValueError) as refused:
        parse_runner_config({"commands": {"x": "true"}, **spec})
    assert says in str(refused.value)


def test_sizes_and_limit_errors_read_as_people_write_them_T7():
    """T7: sizes are bytes or binary units; the error names the limit and its value."""
    assert [parse_size(v, "f") for v in (2048, "64MiB", "1G", "512 KiB", "1.5M")] == [
        2048,
        64 * MIB,
        GIB,
        512 * KIB,
        int(1.5 * MIB),
    ]
    limits = Limits(memory_bytes=64 * MIB, processes=32)
    assert str(exceeded("memory_bytes", limits, "why")) == (
        "the execution passed its memory limit (64 MiB): why; it was stopped"
    )
    assert exceeded("processes", limits).limit == "process"
