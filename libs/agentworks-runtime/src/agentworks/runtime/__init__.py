"""AgentWorks runtime SDK: turn workers for agent runtimes, and the demo crew (R1, R2).

Runtimes are processes outside the services. A `TurnWorker` claims turns for the
targets it serves, keeps their leases alive, runs a handler with a `TurnContext`, and
completes them. Function executions (`ClaimExecution`) will get their own worker here.
"""

from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.turns import (
    TurnContext,
    TurnHandler,
    TurnOutcome,
    TurnWorker,
    delivery_kind,
)

__all__ = [
    "RuntimeConfig",
    "TurnContext",
    "TurnHandler",
    "TurnOutcome",
    "TurnWorker",
    "delivery_kind",
]
