"""OpenTelemetry tracing of gRPC and database calls: off unless OTEL_* switches it on.

The standard variables decide: tracing starts when `OTEL_TRACES_EXPORTER` names an
exporter (`otlp`, `console`) or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true`. The OTLP exporter
reads its own settings (headers, protocol, timeouts) from the environment as usual.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import structlog

log = structlog.get_logger("agentworks.tracing")


def tracing_requested(environ: Mapping[str, str] | None = None) -> str | None:
    """The exporter the environment asks for (`otlp`, `console`), or None for off."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return None
    if exporter:
        return exporter.split(",")[0].strip()
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return "otlp"
    return None


def configure_tracing(service: str) -> bool:
    """Install the tracer provider and the gRPC instrumentation; call before serving."""
    exporter_name = tracing_requested()
    if exporter_name is None:
        return False
    from opentelemetry import trace
    from opentelemetry.instrumentation.grpc import (
        GrpcAioInstrumentorClient,
        GrpcAioInstrumentorServer,
    )
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", service)})
    )
    if exporter_name == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        log.warning("tracing.unknown_exporter", exporter=exporter_name, supported="otlp,console")
        return False
    trace.set_tracer_provider(provider)
    GrpcAioInstrumentorServer().instrument()
    GrpcAioInstrumentorClient().instrument()
    log.info("tracing.on", exporter=exporter_name)
    return True


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
