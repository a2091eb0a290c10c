"""The runtime's span per turn or execution, continuing the trace that queued it (P4).

The services store the W3C `traceparent` of the request that queued the work and return
it on the claimed Turn or Execution; the runtime starts its span with that parent, so a
message -> turn -> reply (or a call -> execution -> finish) is one trace. Everything the
handler sends while the span is current (replies, reports, heartbeats, the finish)
carries it on as gRPC metadata, through the gRPC client instrumentation that
`agentworks.core.tracing.configure_tracing` installs. Without tracing switched on (or
without the SDK: `agentworks-runtime[tracing]`) the spans are no-ops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_tracer = trace.get_tracer("agentworks.runtime")
_propagator = TraceContextTextMapPropagator()


@contextlib.contextmanager
def work_span(name: str, traceparent: str, attributes: Mapping[str, str]) -> Iterator[Span]:
    """A current span named `name`, child of `traceparent` (a root span when empty)."""
    parent = _propagator.extract({"traceparent": traceparent}) if traceparent else None
    with _tracer.start_as_current_span(
        name, context=parent, kind=SpanKind.CONSUMER, attributes=dict(attributes)
    ) as span:
        yield span
