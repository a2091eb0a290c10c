"""`agentworks up`: the development supervisor (embedded PostgreSQL, services, demo runtimes)."""
