"""Tracing of gRPC and database calls, and trace context stored with queued work (P4).

`configure_tracing` (in `agentworks.core.tracing`, shared with the runtimes) switches
tracing on from the standard OTEL_* variables. The services store the W3C
`traceparent` of the request that queues work (a delivery, a call) with its row and
return it on the claimed Turn or Execution, so the runtime that does the work continues
the caller's trace (`current_traceparent`).
"""

from __future__ import annotations

from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from agentworks.core.tracing import configure_tracing as configure_tracing
from agentworks.core.tracing import shutdown_tracing as shutdown_tracing
from agentworks.core.tracing import tracing_requested as tracing_requested
from agentworks.server import queries

_PROPAGATOR = TraceContextTextMapPropagator()


def current_traceparent() -> str:
    """The W3C `traceparent` of the span in progress; "" when there is none (tracing
    off, or a request that came without trace context and was not traced)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent", "")


def trace_database(database) -> None:
    """Trace a `Database`: every statement of its engine, and each hot-path block."""
    from opentelemetry import trace
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    engine = database.engine
    # The instrumentation declares SQLAlchemy < 2.1 but uses only the stable event API,
    # which 2.1 keeps; without skip_dep_check it would silently do nothing.
    SQLAlchemyInstrumentor().instrument(
        engine=getattr(engine, "sync_engine", engine), skip_dep_check=True
    )
    database.tracer = trace.get_tracer("agentworks.db")
    queries.tracer = database.tracer  # a span per named query
