"""The `agentworks` command line: a client of the gateway's HTTP API."""
