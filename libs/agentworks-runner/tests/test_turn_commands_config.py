"""The command runner's config for turn commands (L2): `turns` beside `commands`, bad
ones refused saying why."""

from __future__ import annotations

import pytest

from agentworks.runner.runner import parse_runner_config
from agentworks.runner.turn_runner import TurnCommandRunner


def test_turn_commands_are_declared_per_target_beside_the_function_commands_L2():
    """L2: `turns` maps crew:/workflow: targets to commands (a string by /bin/sh -c);
    a config may have turns alone; the policies apply to both."""
    config = parse_runner_config(
        {
            "turns": {"crew:demo": ["python3", "agent.py"], "workflow:w1": "echo $X"},
            "commands": {"hello": ["echo", "hi"]},
            "network": "none",
        }
    )
    assert config.turns == {
        "crew:demo": ("python3", "agent.py"),
        "workflow:w1": ("/bin/sh", "-c", "echo $X"),
    }
    assert config.commands == {"hello": ("echo", "hi")}
    assert config.policy.network == "none"
    alone = parse_runner_config({"turns": {"crew:demo": ["agent"]}})
    assert alone.commands == {} and alone.turns == {"crew:demo": ("agent",)}


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"turns": {"demo": ["agent"]}}, "turns entry 'demo' must name a target such as crew:"),
        ({"turns": {"crew:demo": ""}}, "command for target 'crew:demo' is empty"),
        ({"turns": {"crew:demo": [1]}}, "command for target 'crew:demo' must be a list"),
        ({"turns": {}, "commands": {}}, "no commands configured"),
        ({"turns": {"crew:x": ["a"]}, "turn": {}}, "unknown settings ['turn']"),
    ],
)
def test_bad_turn_commands_are_refused_naming_what_is_wrong_L2(spec, says):
    """L2: a target that is not crew:/workflow:, an empty or mistyped command, nothing
    configured at all, an unknown setting: ValueError saying which."""
    with pytest.raises(ValueError) as refused:
        parse_runner_config(spec)
    assert says in str(refused.value)


def test_a_turn_runner_needs_a_command_L2(tmp_path):
    """L2: a TurnCommandRunner without turn commands is refused before any sandbox."""
    with pytest.raises(ValueError, match="no turn commands configured"):
        TurnCommandRunner({}, root=tmp_path, sandbox="none")
