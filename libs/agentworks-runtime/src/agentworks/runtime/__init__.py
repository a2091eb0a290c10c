"""AgentWorks runtime SDK: turn and execution workers on one lease-worker base.

Runtimes are processes outside the services (R1). A `TurnWorker` claims turns for the
targets it serves, keeps their leases alive, runs a handler with a `TurnContext` (reply
with `send_message`, ask for a wake-up with `wake_me`, call functions with
`call_function`), and completes them. An
`ExecutionWorker` does the same for function executions with an `ExecutionContext`;
the command runner (`agentworks.runner`, R2) and the agent integrations
(`agentworks.agents`) build on them.
`run_until_signal` runs several workers in one process under one signal handler.
"""

import os

# Before gRPC is imported. A runtime runs user code, which may fork (multiprocessing, a
# library's helper process) while the workers' gRPC calls are in flight; gRPC's fork
# handlers then make the child die at once (seen in about 4 of 10 forks with four claim
# long-polls in flight). The children never use the parent's gRPC, so they need no
# handlers. A process that sets the variable itself keeps its choice.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.executions import (
    ExecutionContext,
    ExecutionHandler,
    ExecutionOutcome,
    ExecutionStopped,
    ExecutionWorker,
    execution_worker,
    serve_executions,
)
from agentworks.runtime.serving import run_until_signal
from agentworks.runtime.turns import (
    TurnContext,
    TurnHandler,
    TurnOutcome,
    TurnWorker,
    delivery_attributes,
    delivery_kind,
)

__all__ = [
    "ExecutionContext",
    "ExecutionHandler",
    "ExecutionOutcome",
    "ExecutionStopped",
    "ExecutionWorker",
    "RuntimeConfig",
    "TurnContext",
    "TurnHandler",
    "TurnOutcome",
    "TurnWorker",
    "delivery_attributes",
    "delivery_kind",
    "execution_worker",
    "run_until_signal",
    "serve_executions",
]
