"""The AgentWorks gateway: API tokens, the MCP server, the HTTP tool API and the CLI."""
