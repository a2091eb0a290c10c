"""The agent's own tools, defined once (L1), for MCP (L2), tool-calling loops (L3) and
the reference LLM runtime (L4).

`turn_toolbox(ctx)` gives the tools of one turn (reply, start a conversation, wake-ups,
function calls, the transcript); `execution_toolbox(ctx)` those of one execution
(progress, messages, events, workflow steps, a human-input question, function calls).
`Toolbox.call(name, arguments)` checks the arguments against the tool's schema and runs
it; refusals are `ToolError`. `shapes` offers the tools as OpenAI and Anthropic tool
definitions with dispatchers. There is no return_function_result tool: an execution's
result is JSON written to FUNCTION_RESULT_FILE.
"""

from agentworks.agents.agent_tools.execution_tools import execution_toolbox
from agentworks.agents.agent_tools.shapes import (
    anthropic_tools,
    dispatch_anthropic,
    dispatch_openai,
    openai_tools,
)
from agentworks.agents.agent_tools.toolbox import AgentTool, Toolbox, ToolError, ToolHandler
from agentworks.agents.agent_tools.turn_tools import turn_toolbox

__all__ = [
    "AgentTool",
    "ToolError",
    "ToolHandler",
    "Toolbox",
    "anthropic_tools",
    "dispatch_anthropic",
    "dispatch_openai",
    "execution_toolbox",
    "openai_tools",
    "turn_toolbox",
]
