"""The A2A binding (X1-X3): every target the caller may see is an A2A agent, served by
the gateway with a2a-sdk's JSON-RPC binding over a `RequestHandler` whose tasks are
calls and conversations (no task store of its own). docs/a2a.md is the contract."""

from agentworks_gateway.a2a.routes import a2a_routes

__all__ = ["a2a_routes"]
