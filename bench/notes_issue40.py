"""The notes of issue 40's levers, each measured on its own (docs/performance.md)."""

from __future__ import annotations

ISSUE_40 = [
    "Issue 40, lever 1: a verified identity is reused until it must be checked again. "
    "Services had remembered verified tokens since the first round (cleared whole when "
    "full); now `agentworks.core.remembered` is a least-recently-used store of at most "
    "4,096 tokens per trusted-keys set, each entry valid until the token's expiry plus "
    "the 30 s skew or 60 s after it was verified, whichever is first, and emptied when "
    "the trusted keys change (a key removed or rotated, its signer retired), so a "
    "remembered token is refused on its first use after the reload "
    "(libs/agentworks-core/tests/test_remembered.py; a cache without the expiry bound, "
    "or one kept across a reload, fails three of its tests each). What remembering is "
    "worth, two back-to-back runs of `python -m bench --quick --only 'call round trip'` "
    "with the store disabled (REMEMBERED_MAX = 0) and enabled: 324.8 -> 408.3 calls/s at "
    "32 callers (0.56x -> 0.68x procrastinate's 581.7 and 603.1), CPU per round trip "
    "4.25 -> 4.08 ms; the floor, whose server runs the same interceptor, 646.5 -> "
    "1,497.1 calls/s and 1.63 -> 1.13 ms: a signature check per request is about half "
    "the floor's CPU. The call round trip gets its first use of each execution's "
    "capability verified in full every time (a new token per claim).",
]
