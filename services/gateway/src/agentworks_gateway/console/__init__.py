"""The web console (V3-V5): server-rendered pages (Jinja2) with htmx for live updates,
over the gateway's own tools, on the gateway's HTTP port. `console_routes(gateway)`
returns its routes; see docs/console.md."""

from agentworks_gateway.console.routes import console_routes

__all__ = ["console_routes"]
