"""The operator's allow-list of external A2A agents (X4) and the follower's settings.

`GATEWAY_A2A_AGENTS_FILE` names a JSON file only the operator and the gateway process
can read (mode 0600 is recommended; agents and runtimes never see it):

    {"agents": {
      "weather": {
        "card_url": "https://weather.example/.well-known/agent-card.json",
        "bearer_token": "...",                       # or:
        "api_key": {"header": "X-API-Key", "value": "..."},
        "targets": ["crew:demo"]                     # optional: who may use it
      }}}

The credential is sent to that agent only, never returned, logged or shown (its field
has no repr). Read once at start; a bad file stops the gateway naming the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentworks.core.settings import ConfigError, Env

AGENTS_FILE_SETTING = "GATEWAY_A2A_AGENTS_FILE"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
HEADER_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")
TARGET_RE = re.compile(r"^(crew|workflow):[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class AllowedAgent:
    """One external agent the operator allows: its card, its credential and who may
    reach it (`targets` empty: every crew and workflow)."""

    name: str
    card_url: str
    targets: tuple[str, ...] = ()
    # The credential as the header that carries it; never in a repr, a log or a result.
    header: str = field(default="", repr=False)
    secret: str = field(default="", repr=False)

    def headers(self) -> dict[str, str]:
        """What every request to this agent carries (the operator's credential)."""
        if not self.header:
            return {}
        return {self.header: self.secret}

    def allows(self, target: str) -> bool:
        return not self.targets or target in self.targets


@dataclass(frozen=True)
class A2AOutConfig:
    """What `GATEWAY_A2A_*` set: the allow-list, and how open external tasks are followed."""

    agents: Mapping[str, AllowedAgent] = field(default_factory=dict)
    # How often a replica asks the external agents about the open tasks it follows.
    poll_seconds: float = 1.0
    # A follower's hold on a task: a replica that stops gives it up after this.
    lease_seconds: float = 30.0
    # One request to an external agent at most this long.
    timeout_seconds: float = 30.0

    @classmethod
    def from_env(cls, env: Env) -> A2AOutConfig:
        path = env.get_str("A2A_AGENTS_FILE")
        return cls(
            agents=read_agents(path) if path else {},
            poll_seconds=env.get_float("A2A_POLL_SECONDS", 1.0, minimum=0.05, maximum=3600),
            lease_seconds=env.get_float("A2A_LEASE_SECONDS", 30.0, minimum=1, maximum=3600),
            timeout_seconds=env.get_float("A2A_TIMEOUT_SECONDS", 30.0, minimum=0.1, maximum=600),
        )


def _bad(name: str, why: str) -> ConfigError:
    return ConfigError(f"{AGENTS_FILE_SETTING}: agent {name!r} {why}")


def _agent(name: str, entry: Any) -> AllowedAgent:
    if not NAME_RE.match(name):
        raise _bad(name, "is not a name: lower-case letters, digits, - and _ (1-63)")
    if not isinstance(entry, dict):
        raise _bad(name, "must be an object with card_url and a credential")
    unknown = set(entry) - {"card_url", "bearer_token", "api_key", "targets"}
    if unknown:
        raise _bad(name, f"has unknown fields {', '.join(sorted(unknown))}")
    card_url = entry.get("card_url")
    if not isinstance(card_url, str) or not card_url.startswith(("https://", "http://")):
        raise _bad(name, "needs card_url, the http(s) URL of its agent card")
    header, secret = "", ""
    if "bearer_token" in entry and "api_key" in entry:
        raise _bad(name, "has both bearer_token and api_key: give one")
    if "bearer_token" in entry:
        token = entry["bearer_token"]
        if not isinstance(token, str) or not token or "\n" in token:
            raise _bad(name, "bearer_token must be a non-empty one-line string")
        header, secret = "Authorization", f"Bearer {token}"
    elif "api_key" in entry:
        key = entry["api_key"]
        if (
            not isinstance(key, dict)
            or not HEADER_RE.match(str(key.get("header", "")))
            or not isinstance(key.get("value"), str)
            or not key["value"]
            or "\n" in key["value"]
        ):
            raise _bad(name, 'api_key must be {"header": "<header name>", "value": "<key>"}')
        header, secret = key["header"], key["value"]
    targets = entry.get("targets", [])
    if not isinstance(targets, list) or not all(
        isinstance(t, str) and TARGET_RE.match(t) for t in targets
    ):
        raise _bad(name, "targets must be a list like ['crew:demo', 'workflow:wf']")
    return AllowedAgent(name, card_url, tuple(targets), header, secret)


def read_agents(path: str) -> dict[str, AllowedAgent]:
    """The allow-list in the file at `path`; ConfigError naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{AGENTS_FILE_SETTING}: cannot read {path} ({exc.strerror})") from None
    except ValueError as exc:
        raise ConfigError(f"{AGENTS_FILE_SETTING}: {path} is not JSON ({exc})") from None
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(agents, dict):
        raise ConfigError(f'{AGENTS_FILE_SETTING}: {path} must hold {{"agents": {{...}}}}')
    return {name: _agent(name, entry) for name, entry in agents.items()}
