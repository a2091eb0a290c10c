"""Tracing (P4): off by default, on through the standard OTEL variables, spanning the
gRPC call and its database statements."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import Unavailable
from agentworks.server.testing import ServiceProcess, until
from agentworks.server.tracing import tracing_requested


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, None),
    ],
)
def test_tracing_is_off_unless_the_standard_variables_ask_P4(env, expected):
    """P4: no OTEL variables, no tracing; the standard ones switch it on or off."""
    assert tracing_requested(env) == expected


async def test_a_traced_service_spans_rpcs_and_sql_P4(
    database_url, signing_keys, identity, tmp_path
):
    """P4: with OTEL_TRACES_EXPORTER=console a service exports a span per RPC and per
    SQL statement, under its service name."""
    service = ServiceProcess(
        "agentworks_messaging",
        "MESSAGING",
        database_url,
        signing_keys,
        OTEL_TRACES_EXPORTER="console",
        OTEL_SERVICE_NAME="messaging-traced",
    )
    spans_file = tmp_path / "spans.json"
    with spans_file.open("w") as out:
        # ConsoleSpanExporter writes to stdout, which ServiceProcess discards: run it here.
        process = subprocess.Popen(  # noqa: ASYNC220 - returns at once
            [sys.executable, "-m", service.module], env=service.env, stdout=out
        )
        try:

            async def registered() -> bool:
                try:
                    async with MessagingClient(
                        service.address, identity=identity("user:ops", {"operator"}), timeout=2
                    ) as ops:
                        await ops.register_target("crew:traced", owner="user:ops")
                except Unavailable:
                    return False  # not listening yet
                return True

            await until(registered, 30, every=0.1, what="the traced service answers")
        finally:
            process.terminate()
            process.wait(30)
    spans = spans_file.read_text()
    assert "/agentworks.messaging.v1.MessagingService/RegisterTarget" in spans
    assert '"service.name": "messaging-traced"' in spans
    assert "INSERT INTO messaging.targets" in spans


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "grpc"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": " GRPC "}, "grpc"),
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            },
            "http/protobuf",
        ),
    ],
)
def test_otlp_goes_over_grpc_or_http_as_the_standard_variables_say_P4(env, expected):
    """P4: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, picks the
    OTLP transport (grpc by default, as the Python SDK's own default)."""
    from agentworks.core.tracing import otlp_protocol

    assert otlp_protocol(env) == expected


def test_an_unknown_otlp_protocol_stops_the_start_naming_the_variable_P4(
    database_url, signing_keys
):
    """P4: an OTLP protocol the exporters do not speak (http/json here) is a setting at
    fault: the service does not start (exit 2) and its one line names the variable."""
    service = ServiceProcess(
        "agentworks_messaging",
        "MESSAGING",
        database_url,
        signing_keys,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/json",
    )
    done = subprocess.run(
        [sys.executable, "-m", service.module],
        env=service.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "OTEL_EXPORTER_OTLP_PROTOCOL must be one of grpc, http/protobuf" in done.stderr
