"""The agent's MCP server (L2): the agent tools of one turn or one execution, served to
the agent process the runtime runs for it, with that item's capability only (T3).

- `server.build_server(toolbox)`: an MCP server (the official SDK's low-level `Server`)
  listing a `Toolbox`'s tools and running each call; `server.Endpoint`: it over
  Streamable HTTP (stateless, JSON answers) on a Unix socket or a loopback TCP port,
  behind a bearer token of its own, for as long as one `async with` lasts.
- `handout.serve_agent(toolbox, folder)`: the endpoint of one turn or execution, with
  the client configuration (`mcp.json` form) written there
  and the variables its process gets; `handout.turn_tools(ctx)` and
  `handout.execution_tools(ctx)`: the tool sets, acting with the capability
  (`acting.capability_view`).
- `bridge`: the stdio bridge an MCP-capable agent launches (`python -m
  agentworks.agents.agent_mcp stdio`), standard library only, so it runs in the sandbox.

Why the endpoint lives in the runtime and reaches the sandbox through a Unix socket:
the tools call the services with the capability over the runtime's own gRPC channels
(with its TLS client certificate, T5), which the sandbox must not hold; with `network:
none` the sandbox has only a loopback of its own, so no TCP port of the runtime is
reachable from it, and with `outbound` every local process could reach a TCP port. A
socket file is reached through the filesystem only: the runner keeps it in a folder of
its own (`command_process.ProcessRunner.mcp_socket`) and binds it into that item's
sandbox alone, at `/run/agentworks/mcp.sock`; another call's or turn's sandbox has a
private `/tmp` and sees neither, whatever its network (T6). The socket is 0600 and the
sandbox user's, and each request needs the endpoint's token besides. Stdio pipes wired
by the runner would reach only the command's first process; an agent program instead
launches its MCP servers itself (from `mcp.json`), so the bridge it launches connects
to the socket.
"""
