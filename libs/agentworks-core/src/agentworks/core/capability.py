"""Per-turn and per-execution capabilities (T3): what one leased item allows.

A capability is an identity token (agentworks.core.identity) with one more claim,
`cap`, signed by the service that leased the item: service:messaging for a turn,
service:functions for an execution (agentworks.core.trust says so). Its `sub` is the
runtime's principal (the agent or workflow that claimed), its `exp` the lease's expiry
(at most the identity maximum), and `cap` names the item:

    {"kind": "turn", "id": "<turn id>", "conversation_id": "<conversation id>"}
    {"kind": "execution", "id": "<call id>", "call_id": "<call id>"}

A service accepts such an identity only for that item's own operations, and refuses it
once the lease has ended; the command runner hands a child process this token (never
the runtime's credential or key). This module holds the claim's shape only; minting and
checking live beside the identity (agentworks.core.identity) and the services
(agentworks.server.capabilities).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLAIM = "cap"
TURN = "turn"
EXECUTION = "execution"
KINDS = (TURN, EXECUTION)

# What the command runner gives a child process (T3): the token itself, and the file in
# the call folder that holds the current one (rewritten at each heartbeat, mode 0600).
CAPABILITY_VARIABLE = "AGENTWORKS_CAPABILITY"
CAPABILITY_FILE_VARIABLE = "AGENTWORKS_CAPABILITY_FILE"
MAX_ID = 128


@dataclass(frozen=True)
class Capability:
    """The item a capability is bound to: a turn (with its conversation) or an execution."""

    kind: str
    id: str
    conversation_id: str = ""

    @property
    def call_id(self) -> str:
        return self.id if self.kind == EXECUTION else ""

    def claim(self) -> dict[str, str]:
        if self.kind == TURN:
            return {"kind": TURN, "id": self.id, "conversation_id": self.conversation_id}
        if self.kind == EXECUTION:
            return {"kind": EXECUTION, "id": self.id, "call_id": self.id}
        return {"kind": self.kind, "id": self.id}

    def describe(self) -> str:
        if self.kind == TURN:
            return f"turn {self.id} (conversation {self.conversation_id})"
        return f"execution {self.id}"


def turn(turn_id: str, conversation_id: str) -> Capability:
    return Capability(TURN, turn_id, conversation_id)


def execution(call_id: str) -> Capability:
    return Capability(EXECUTION, call_id)


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID:
        raise ValueError(f"its cap claim has no valid {name}")
    return value


def from_claim(value: Any) -> Capability:
    """The capability of a token's `cap` claim; ValueError saying what is wrong."""
    if not isinstance(value, dict):
        raise ValueError("its cap claim is not an object")
    kind = value.get("kind")
    if kind not in KINDS:
        raise ValueError(f"its cap claim has kind {kind!r}; capabilities are turn or execution")
    item = _text(value.get("id"), "id")
    if kind == TURN:
        return turn(item, _text(value.get("conversation_id"), "conversation_id"))
    if value.get("call_id", item) != item:
        raise ValueError("its cap claim names two different calls (id and call_id)")
    return execution(item)
