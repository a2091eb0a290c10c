"""Pure checks of messaging's use cases: a message's text and parts (C2, P6); the turn a
reply completes (C10); who reads a failed turn's error (L12). The text's size and the
retry key's length are field rules of the proto, checked before the handler
(`agentworks.server.validation`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agentworks.core.checks import check_json_depth, check_no_nul
from agentworks.core.errors import InvalidArgument, PermissionDenied, PreconditionFailed, Reason
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_PARTS_BYTES
from agentworks.server.capabilities import require_item
from agentworks_messaging.models import Delivery, Message


def check_text(text: str, parts: list[dict[str, Any]] | None) -> None:
    check_no_nul(text, "text")
    check_json_depth(parts, "parts")
    check_no_nul(parts or [], "parts")  # naming the part and the key inside it
    if not text.strip() and not parts:
        raise InvalidArgument("text is empty: send some text or at least one part")
    for i, part in enumerate(parts or ()):
        if not part.get("data") and not str(part.get("text", "")).strip():
            raise InvalidArgument(f"parts[{i}] is empty: a part carries some text or data")
    if parts:
        parts_size = len(json.dumps(parts).encode())
        if parts_size > MAX_PARTS_BYTES:
            raise InvalidArgument(
                f"parts are {parts_size} bytes as JSON; the limit is {MAX_PARTS_BYTES} bytes"
            )


def check_turn_to_complete(
    identity: Identity, turn_id: str, conversation_id: str, turn: tuple[str, str] | None
) -> None:
    """The turn a reply ends is the caller's, of the reply's conversation, and not ended
    otherwise (completed already is fine: a retry). Checked before anything is stored;
    `turn` is its (conversation id, status), None with a capability (checked already)."""
    require_item(identity, "turn", turn_id)
    if turn is None:
        return  # the capability's own turn, of this conversation, leased: checked
    turn_conversation, status = turn
    if turn_conversation != conversation_id:
        raise InvalidArgument(
            f"complete_turn_id {turn_id!r} is a turn of another conversation: name the "
            "turn this reply answers (the turn of the inbox's conversation)"
        )
    if status not in ("active", "expired", "completed"):
        raise PreconditionFailed(
            f"turn {turn_id} is already {status}; the reply was not stored (send it "
            "without complete_turn_id if it should still go out)"
        )


def refuse_runtime_inbox_read(identity: Identity) -> None:
    """A runtime's scoped identity (T2) reads no inbox: it works on turns, whose
    deliveries it claims; inboxes are its callers' (A3)."""
    if identity.targets is not None:
        raise PermissionDenied(
            f"{identity.principal} acts with a runtime credential's identity (scoped to "
            f"{', '.join(sorted(identity.targets))}), and a runtime reads no inbox: read "
            "inboxes with an API token",
            reason=Reason.OUT_OF_SCOPE,
            metadata={"targets": ",".join(sorted(identity.targets))},
        )


def without_turn_error(entry: Message | Delivery) -> Message | Delivery:
    """A transcript entry as a reader who is neither the target's owner nor the operator
    sees it: without its turn's error (L12, A3), the crew's stderr."""
    if isinstance(entry, Delivery) and entry.turn_error:
        return dataclasses.replace(entry, turn_error="")
    return entry
