"""Shared core of the AgentWorks services: config, logging, database, gRPC, identity."""
