"""AgentWorks agent integrations on top of the runtime SDK (`agentworks.runtime`).

- `agent_tools`: the agent's tools (L1): their definitions and handlers, one toolbox for
  a turn and one for an execution.
- `agent_mcp`: the same tools over MCP (L2): the per-item server and the stdlib-only
  stdio bridge a command runs in the sandbox.
- `llm`: the reference LLM runtime (L4): turns and executions answered by a model over
  the OpenAI-compatible API.
"""
