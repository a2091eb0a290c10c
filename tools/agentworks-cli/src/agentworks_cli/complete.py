"""`agentworks __complete WORD...`: the names the gateway knows, for shell completion (V8).

The completion scripts (`agentworks completion bash|zsh`) complete commands, options and
choices by themselves; where an argument takes a crew, workflow or target name, a
function name, a call id, an inbox id or a conversation id they run this hidden command
with the words typed so far (the last one the word being completed). It finds which
argument that word is for with the CLI's own parser, asks the gateway's `list` tool once
with the user's token (so it offers only what the user may see, A3), and prints the
matching values one a line. It is silent and exits 0 whatever goes wrong: no gateway, no
token, a refusal, a slow answer (it gives up after COMPLETE_TIMEOUT_SECONDS).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworks_cli.settings import resolve_settings

# The whole exchange with the gateway, connecting included: a TAB must never hang.
COMPLETE_TIMEOUT_SECONDS = 1.0
# How many calls, inboxes or conversations (newest first) are offered.
RECENT = 50
# How many targets are asked for (the list tool's largest page).
TARGETS_PAGE = 200

# Which argument (by its dest) takes which kind of name, for every command.
_KIND_OF_DEST = {
    "crew": "crew",
    "workflow": "workflow",
    "target": "target",
    "function": "function",
    "call": "call",
    "call_id": "call",
    "call_ids": "call",
    "inbox": "inbox",
    "inbox_id": "inbox",
    "conversation": "conversation",
}
# Where a dest names something else in one command.
_KIND_OF_COMMAND_DEST = {("functions remove", "name"): "function"}
# The list tool's kind and the item field each kind of name comes from.
_LISTED = {
    "call": ("calls", "call_id"),
    "inbox": ("inboxes", "inbox_id"),
    "conversation": ("conversations", "conversation_id"),
}


def kind_of(path: str, action: argparse.Action) -> str | None:
    """The kind of name `action` of the command `path` takes, or None."""
    return _KIND_OF_COMMAND_DEST.get((path, action.dest)) or _KIND_OF_DEST.get(action.dest)


def _subparsers(node: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in node._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _positionals(node: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in node._actions
        if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
    ]


def dynamic_paths(parser: argparse.ArgumentParser) -> list[str]:
    """The command paths with an argument that takes a name the gateway knows."""
    found: list[str] = []

    def walk(node: argparse.ArgumentParser, path: str) -> None:
        if any(kind_of(path, a) for a in node._actions if a.nargs != 0):
            found.append(path)
        for name, sub in _subparsers(node).items():
            walk(sub, f"{path} {name}".strip())

    walk(parser, "")
    return found


@dataclass
class Slot:
    """The word being completed: the command, the kind of name it takes, what it starts
    with, and the values given so far (by dest) that narrow it (the function's target)."""

    path: str
    kind: str
    prefix: str
    given: dict[str, str] = field(default_factory=dict)

    def target(self) -> str:
        """The target the function being completed belongs to ("" when none is given)."""
        if self.given.get("target"):
            return self.given["target"]
        for kind in ("crew", "workflow"):
            if self.given.get(kind):
                return f"{kind}:{self.given[kind]}"
        return ""


def slot_of(parser: argparse.ArgumentParser, words: Sequence[str]) -> Slot | None:
    """What the last of `words` (the words after `agentworks`) is for, if it is a name."""
    if not words:
        return None
    node, path = parser, ""
    given: dict[str, str] = {}
    positionals: list[str] = []
    pending: argparse.Action | None = None
    for word in words[:-1]:
        if pending is not None:
            given[pending.dest] = word
            pending = None
            continue
        if word.startswith("-") and word != "-":
            option, equals, value = word.partition("=")
            action = node._option_string_actions.get(option)
            if action is not None and action.nargs != 0:
                if equals:
                    given[action.dest] = value
                else:
                    pending = action
            continue
        sub = _subparsers(node).get(word)
        if sub is not None:
            node, path, positionals = sub, f"{path} {word}".strip(), []
            continue
        positionals.append(word)
    actions = _positionals(node)
    for action, value in zip(actions, positionals, strict=False):
        given.setdefault(action.dest, value)
    current = words[-1]
    if pending is not None:
        slot_action = pending
    elif current.startswith("-"):
        return None
    elif len(positionals) < len(actions):
        slot_action = actions[len(positionals)]
    elif actions and actions[-1].nargs in ("+", "*"):
        slot_action = actions[-1]
    else:
        return None
    kind = kind_of(path, slot_action)
    return Slot(path, kind, current, given) if kind else None


def _names(items: Iterable[dict[str, Any]], slot: Slot) -> list[str]:
    """The values of `slot`'s kind in the list tool's items."""
    if slot.kind in _LISTED:
        key = _LISTED[slot.kind][1]
        return [str(item[key]) for item in items]
    if slot.kind == "function":
        return [str(f["name"]) for item in items for f in item.get("functions", ())]
    targets = [str(item["target"]) for item in items]
    if slot.kind == "target":
        return targets
    prefix = f"{slot.kind}:"
    return [t.removeprefix(prefix) for t in targets if t.startswith(prefix)]


def _request(slot: Slot) -> dict[str, Any] | None:
    """The list tool's arguments that answer `slot` in one request (None: nothing to ask)."""
    if slot.kind in _LISTED:
        args: dict[str, Any] = {"what": _LISTED[slot.kind][0], "limit": RECENT}
        if slot.kind == "call" and slot.target():
            args["target"] = slot.target()
        return args
    if slot.kind == "function":
        target = slot.target()
        return {"what": "targets", "target": target, "limit": 1} if target else None
    return {"what": "targets", "limit": TARGETS_PAGE}


def candidates(slot: Slot, url: str, token: str) -> list[str]:
    """The names the gateway offers for `slot`, starting with what was typed."""
    import httpx  # here, not at import: the CLI's other commands do not wait for it

    args = _request(slot)
    if args is None:
        return []
    response = httpx.post(
        url.rstrip("/") + "/api/v1/tools/list",
        json=args,
        headers={"Authorization": f"Bearer {token}"},
        timeout=COMPLETE_TIMEOUT_SECONDS,
    )
    response.raise_for_status()
    names = _names(response.json()["items"], slot)
    return sorted({n for n in names if n.startswith(slot.prefix)})


def print_names(parser: argparse.ArgumentParser, words: Sequence[str]) -> int:
    """Print the completions of the last of `words` for `parser` (the `agentworks`
    parser); always exit 0, printing nothing on any error (completion must never print
    an error or hang)."""
    try:
        slot = slot_of(parser, words)
        if slot is None:
            return 0
        settings = resolve_settings(
            slot.given.get("url"), slot.given.get("token"), os.environ, Path.cwd()
        )
        if not settings.token:
            return 0
        found = candidates(slot, settings.url, settings.token)
    except Exception:  # anything at all: complete nothing, say nothing
        return 0
    sys.stdout.write("".join(f"{name}\n" for name in found))
    return 0
