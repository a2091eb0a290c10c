"""What every side of AgentWorks shares: services, typed clients, runtimes and the CLI.

Errors with reasons and metadata (`errors`), limits (`limits`), stateful checks
(`checks`), identities and their trust (`identity`, `trust`, `keys`, `capability`),
settings (`settings`, `tls`), logging, tracing, metrics and gRPC metadata keys (`wire`).
"""
