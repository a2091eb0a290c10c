"""What the functions store's callers and tests name of its SQL: the SQLSTATEs its
database function raises, and the claim's text (the statements are in ../queries.sql)."""

from __future__ import annotations

from agentworks_functions.store.base import Q

# What create_call_v4 raises when the target is at its running limit.
BUSY_SQLSTATE = "AW001"
# A caller at its share of the target's limit (migration 0007).
CALLER_BUSY_SQLSTATE = "AW002"

# ClaimExecution for one target, as tests PREPARE it.
_CLAIM_ONE = Q.sql("claim_execution_of_target")
