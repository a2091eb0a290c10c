"""The identities a verifier has verified, remembered until they must be checked again.

Most of the cost of an identity is its signature check, and a caller reuses one token
for minutes: `agentworks.core.identity.verify` keeps what verifying a token found here,
keyed by the token itself, and on a hit only looks whether the entry is still valid.

Security first: an entry is valid until the token's expiry (plus the allowed clock
skew) or REMEMBER_SECONDS after it was verified, whichever comes first, so a result
never outlives its token, and the signature and the signer's rights are checked again
at least that often. The store belongs to one trusted-keys set
(`agentworks.core.keys.TrustedKeys.remembered`), which replaces it with an empty one
whenever the keys change (a key removed, rotated or its signer retired), so a token of
a key that is no longer trusted is refused on its next use after the reload. It holds at
most a fixed number of entries, the least recently used leaving first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

# How long a verified token is believed without checking its signature again (at most:
# never past its own expiry).
REMEMBER_SECONDS = 60.0
# Verified identities one trusted-keys set remembers.
REMEMBERED_MAX = 4096


class Remembered:
    """A size-capped LRU of verified tokens: token -> (what verifying found, valid until)."""

    __slots__ = ("_entries", "_lock", "max_entries")

    def __init__(self, max_entries: int = REMEMBERED_MAX) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str, now: float) -> Any:
        """What verifying `token` found, if remembered and still valid at `now`; else None
        (an entry past its time is forgotten)."""
        with self._lock:
            entry = self._entries.get(token)
            if entry is None:
                return None
            found, valid_until = entry
            if now >= valid_until:
                del self._entries[token]
                return None
            self._entries.move_to_end(token)
            return found

    def put(self, token: str, found: Any, now: float, expires: float) -> None:
        """Remember `found` for `token` until `expires` (the token's own end, skew
        included) or REMEMBER_SECONDS from `now`, whichever is first."""
        valid_until = min(expires, now + REMEMBER_SECONDS)
        if valid_until <= now or self.max_entries <= 0:
            return
        with self._lock:
            self._entries[token] = (found, valid_until)
            self._entries.move_to_end(token)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, token: object) -> bool:
        return token in self._entries
