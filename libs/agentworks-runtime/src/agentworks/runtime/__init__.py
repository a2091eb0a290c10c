"""AgentWorks runtime SDK: turn and execution workers, the command runner, the demo crew.

Runtimes are processes outside the services (R1). A `TurnWorker` claims turns for the
targets it serves, keeps their leases alive, runs a handler with a `TurnContext` (reply
with `send_message`, ask for a wake-up with `wake_me`, call functions with
`call_function`), and completes them. An
`ExecutionWorker` does the same for function executions with an `ExecutionContext`;
`CommandRunner` is an execution handler that runs a declared command per call (R2).
`run_until_signal` runs several workers in one process under one signal handler.
"""

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
