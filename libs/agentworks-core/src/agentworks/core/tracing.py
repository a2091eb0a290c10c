"""OpenTelemetry tracing for every AgentWorks process: off unless OTEL_* switches it on.

The standard variables decide: tracing starts when `OTEL_TRACES_EXPORTER` names an
exporter (`otlp`, `console`) or an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true`. OTLP goes over
gRPC or HTTP as `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`,
says (`grpc`, the default, or `http/protobuf`); the exporter reads its other settings
(endpoint, headers, timeouts) from the environment as usual.

Needs the OpenTelemetry SDK, which the services have and a runtime gets with
`pip install 'agentworks-runtime[tracing]'`; everything is imported only when tracing
is on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import structlog

log = structlog.get_logger("agentworks.tracing")

PROTOCOLS = ("grpc", "http/protobuf")


class TracingUnavailable(RuntimeError):
    """Tracing was asked for but cannot be set up (an unknown protocol, no SDK)."""


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


def otlp_protocol(environ: Mapping[str, str] | None = None) -> str:
    """`grpc` or `http/protobuf`: the OTLP transport for traces (default grpc); an
    unknown value is a `TracingUnavailable` naming the variable."""
    env = os.environ if environ is None else environ
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = env.get(variable, "").strip().lower()
        if value:
            if value not in PROTOCOLS:
                raise TracingUnavailable(
                    f"{variable} must be one of {', '.join(PROTOCOLS)}, got {value!r}"
                )
            return value
    return "grpc"


def _otlp_exporter(protocol: str):  # type: ignore[no-untyped-def]
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcSpanExporter,
    )

    return GrpcSpanExporter()


def configure_tracing(service: str, *, grpc_server: bool = True) -> bool:
    """Install the tracer provider and the gRPC instrumentation (client side, and the
    server side with `grpc_server`) when the environment asks for tracing; call before
    any channel or server is made. Whether tracing is on."""
    exporter_name = tracing_requested()
    if exporter_name is None:
        return False
    protocol = otlp_protocol() if exporter_name == "otlp" else ""
    try:
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
    except ImportError as exc:
        raise TracingUnavailable(
            f"tracing is switched on (OTEL_* variables) but the OpenTelemetry SDK is not "
            f"installed ({exc.name}): pip install 'agentworks-runtime[tracing]'"
        ) from None

    # Resource.create also reads OTEL_RESOURCE_ATTRIBUTES (service.instance.id, ...).
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", service)})
    )
    if exporter_name == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter_name == "otlp":
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(protocol)))
    else:
        log.warning("tracing.unknown_exporter", exporter=exporter_name, supported="otlp,console")
        return False
    trace.set_tracer_provider(provider)
    if grpc_server:
        GrpcAioInstrumentorServer().instrument()
    GrpcAioInstrumentorClient().instrument()
    log.info("tracing.on", exporter=exporter_name, protocol=protocol or None)
    return True


def shutdown_tracing() -> None:
    """Export the spans still buffered (at exit); nothing when tracing is off."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if shutdown is not None:
        shutdown()
