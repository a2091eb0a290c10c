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
    "the floor's CPU.",
    "Issue 40, lever 2: capabilities signed once per lease rather than per renewal. "
    "Not built. For a turn the contract does not allow it: the functions service and "
    "the scheduler honour a turn's capability (Call, GetStatus, wake-ups) without seeing "
    "the turn's lease (P1: no service reads another's tables), so the token's `exp`, "
    "the lease's expiry, is the only thing that ends it there (T3: refused once the "
    "lease ends); a token signed past the lease would outlive it. For an execution it "
    "would be allowed (functions checks the call open and its lease live on every "
    "operation an execution capability may call, and a lost lease ends the call, C11), "
    "but it buys nothing the targets see: no renewal happens within a round trip. "
    "Measured in-process (3,000 each): signing a capability 38.6 us, verifying it "
    "147.9 us, a remembered token 0.5 us; so a heartbeat's new capability costs about "
    "0.2 ms (signed, then verified on its first use) per running item every lease/3 s, "
    "and the claim's own capability, the one a round trip pays, 0.04 ms of its "
    "4.1 ms. In the benchmark's round trips no capability is ever verified: the SDK "
    "replies and finishes as the runtime, a turn's capability goes to functions and the "
    "scheduler only when the handler calls or sets wake-ups, an execution's to the "
    "command it runs.",
]
