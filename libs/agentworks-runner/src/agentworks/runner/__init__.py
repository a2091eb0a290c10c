"""AgentWorks command runner: a runtime whose handlers are commands (R2, T7, T8, L2).

`runner.CommandRunner` serves a target's executions, `turn_runner.TurnCommandRunner` its
turns, each as a command in a sandbox (`sandbox`, bubblewrap) within limits (`limits`,
`watch`, `cgroups`), with a watchdog that ends the command when the runner dies
(`_watchdog`, `guard`) and the agent's tools over MCP (`agentworks.agents.agent_mcp`).
`cli` is the `agentworks-runtime` command.
"""
