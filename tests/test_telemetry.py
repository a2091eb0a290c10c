"""Standard telemetry of a real suite (issue 26, P4): `agentworks up --replicas 2`, every
process with its own /metrics port, printed in the banner, and traces exported over
OTLP/HTTP to a receiver in this test that follows one request from the gateway through
the services to the runtime that claims the work, and back.

One suite for the module: bringing it up (two replicas of everything) is the expensive
part. The receiver is a plain HTTP server decoding `ExportTraceServiceRequest`
(opentelemetry-proto), as a collector would.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from prometheus_client.parser import text_string_to_metric_families

from agentworks.server.testing import Scrape, free_port_block, scrape, until_sync
from tests.test_end_to_end import Up

pytestmark = pytest.mark.timeout(240)

SERVICES = ("messaging", "functions", "scheduler", "gateway")
RUNTIMES = ("demo-runtime", "demo-funcs")


@dataclass(frozen=True)
class Span:
    service: str  # the resource's service.name
    instance: str  # its service.instance.id
    trace_id: str
    span_id: str
    parent_id: str
    name: str


class Receiver(http.server.ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver (POST /v1/traces, protobuf) keeping every span."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[Span] = []
        self.changed = threading.Condition()
        self.requests = 0

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Span(
                            attributes.get("service.name", ""),
                            attributes.get("service.instance.id", ""),
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.name,
                        )
                    )
        with self.changed:
            self.requests += 1
            self.spans += found
            self.changed.notify_all()

    def trace(self, trace_id: str) -> list[Span]:
        with self.changed:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, trace_id: str, done, timeout: float = 60) -> list[Span]:  # type: ignore[no-untyped-def]
        """The spans of the trace once `done(spans)` holds (or fail, showing them)."""
        with self.changed:
            self.changed.wait_for(
                lambda: done([s for s in self.spans if s.trace_id == trace_id]), timeout
            )
        spans = self.trace(trace_id)
        assert done(spans), "\n".join(f"{s.service} {s.name}" for s in spans) or "no spans"
        return spans


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        self.server.add(body)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


# The services' /metrics ask for a bearer token (`agentworks up` gives them this one).
METRICS_TOKEN = "telemetry-test-metrics-token"


@dataclass
class Suite:
    up: Up
    receiver: Receiver
    gateway: str
    token: str
    metrics: dict[str, str]  # child name -> its /metrics URL, from the banner


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Iterator[Suite]:
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    cwd = tmp_path_factory.mktemp("telemetry")
    base, http_port, metrics = free_port_block(6), free_port_block(2), free_port_block(10)
    environ = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}/v1/traces",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "AGENTWORKS_METRICS_TOKEN": METRICS_TOKEN,
    }
    # Kept beside the service.instance.id that `up` adds for each process.
    environ["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment=test"
    up = Up(cwd, base, http_port, "--replicas", "2", "--metrics-port", str(metrics),
            environ=environ)  # fmt: skip
    try:
        up.wait_ready()
        banner = up.output[up.output.index("AgentWorks is up.") :]
        urls = dict(re.findall(r"([a-z]+-[a-z0-9]+) (http://\S+/metrics)", banner))
        token = (cwd / ".agentworks" / "dev-token").read_text().strip()
        yield Suite(up, receiver, f"http://127.0.0.1:{http_port}", token, urls)
    finally:
        assert up.stop() == 0, up.output
        receiver.shutdown()
        receiver.server_close()


def metrics_at(url: str, patience: float = 30) -> Scrape:
    """The metrics page at `url`; the demo runtimes start as the banner is printed, so a
    refused connection is tried again for a while."""

    def answer() -> Scrape | None:
        try:
            return scrape(url, METRICS_TOKEN)
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionRefusedError):
                raise AssertionError(f"{url}: {exc}") from None
            return None

    return until_sync(answer, patience, every=0.2, what=f"{url} answers")


def test_each_process_serves_metrics_on_its_own_port_named_in_the_banner_P3_P4(suite):
    """P3 P4: with --replicas 2 every process (each replica of each service, each
    gateway, each demo runtime) serves /metrics on a port of its own, all printed in the
    banner; each answers as itself (`agentworks_build_info{service_instance_id}` is its
    name), where every replica used to be given the same port variable."""
    expected = [f"{s}-{r}" for s in SERVICES for r in (1, 2)] + list(RUNTIMES)
    assert sorted(suite.metrics) == sorted(expected), suite.up.output
    assert len({url for url in suite.metrics.values()}) == len(expected)
    for name, url in suite.metrics.items():
        body = metrics_at(url).text
        service = "runtime" if name in RUNTIMES else name.rsplit("-", 1)[0]
        info = [
            sample.labels
            for family in text_string_to_metric_families(body)
            if family.name == "agentworks_build_info"
            for sample in family.samples
        ]
        assert [(i["service"], i["service_instance_id"]) for i in info] == [(service, name)]


def test_every_counter_of_every_process_ends_in_total_under_one_rpc_convention_P4(suite):
    """P4: the RPC metrics follow the grpc Prometheus names (`grpc_server_started_total`,
    `grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}`,
    `grpc_server_handling_seconds`) in every gRPC service, and in every process each
    counter's series end in `_total` (no `_created` besides)."""
    httpx.get(f"{suite.gateway}/healthz", timeout=10)
    for name, url in suite.metrics.items():
        body = metrics_at(url).text
        for line in body.splitlines():
            if line.startswith("# TYPE ") and line.endswith(" counter"):
                assert line.split()[2].endswith("_total"), (name, line)
        for family in text_string_to_metric_families(body):
            if family.type == "counter":
                for sample in family.samples:
                    assert sample.name.endswith("_total"), (name, sample.name)
        assert "_created" not in body and "agentworks_rpc_" not in body, name
        if name.startswith(("messaging", "functions", "scheduler")):
            # Every replica is health-checked and registered: it has answered RPCs.
            assert "# TYPE grpc_server_handled_total counter" in body, name
            assert "# TYPE grpc_server_handling_seconds histogram" in body, name


def _traceparent() -> tuple[str, dict[str, str]]:
    trace_id = os.urandom(16).hex()
    return trace_id, {"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"}


def _call_tool(suite: Suite, tool: str, args: dict, headers: dict[str, str]) -> dict:
    answer = httpx.post(
        f"{suite.gateway}/api/v1/tools/{tool}",
        json=args,
        headers={"Authorization": f"Bearer {suite.token}", **headers},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _back_from(spans: list[Span], runtime_span: str, service: str) -> bool:
    """Whether the runtime's span has a descendant served by `service` (its report)."""
    by_id = {s.span_id: s for s in spans}
    root = next((s for s in spans if s.name == runtime_span), None)
    if root is None:
        return False
    for span in spans:
        if span.service != service:
            continue
        parent = by_id.get(span.parent_id)
        while parent is not None:
            if parent.span_id == root.span_id:
                return True
            parent = by_id.get(parent.parent_id)
    return False


def test_a_message_its_turn_and_the_reply_are_one_trace_P4_C6_R1(suite):
    """P4 C6 R1: a message sent through the gateway's HTTP API, the turn the demo runtime
    claims for it and the reply it sends are one trace: spans from the gateway (its
    HTTP request), messaging and the runtime share the caller's trace id; the runtime's
    span continues the traceparent stored with the delivery, and its reply and
    CompleteTurn reach messaging as children of it."""
    trace_id, headers = _traceparent()
    receipt = _call_tool(
        suite, "messages", {"action": "send", "crew": "demo", "message": "hello"}, headers
    )
    read = {"action": "read", "inbox_id": receipt["inbox_id"], "wait_seconds": 20}
    assert _call_tool(suite, "messages", read, {})["messages"], "no reply"

    def from_the_caller(spans: list[Span]) -> bool:
        return any(
            s.service == "gateway" and s.parent_id == headers["traceparent"][36:52] for s in spans
        )

    def done(spans: list[Span]) -> bool:
        # The gateway's HTTP span ends after its child spans and may be exported in a
        # later batch than they are: wait for it too, not only for a gateway span.
        return (
            {"gateway", "messaging", "runtime"} <= {s.service for s in spans}
            and _back_from(spans, "turn crew:demo", "messaging")
            and from_the_caller(spans)
        )

    spans = suite.receiver.wait_for(trace_id, done)
    instances = {s.instance for s in spans if s.service == "runtime"}
    assert instances == {"demo-runtime"}, instances
    assert from_the_caller(spans)


async def test_an_mcp_tool_call_and_the_turn_it_queues_are_one_trace_P4_G1(suite):
    """P4 G1: the same through /mcp with the official MCP client: its HTTP requests carry
    the caller's traceparent, and the gateway's /mcp span, messaging's Send and the
    demo runtime's turn (and its reply back to messaging) share that trace."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    trace_id, headers = _traceparent()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {suite.token}", **headers}, timeout=60
    )
    async with (
        http,
        Client(streamable_http_client(f"{suite.gateway}/mcp", http_client=http)) as mcp,
    ):
        sent = await mcp.call_tool("messages", {"action": "send", "crew": "demo", "message": "hi"})
        assert not sent.is_error, sent.content

    def done(spans: list[Span]) -> bool:
        return any(s.service == "gateway" and "/mcp" in s.name for s in spans) and _back_from(
            spans, "turn crew:demo", "messaging"
        )

    spans = await asyncio.to_thread(suite.receiver.wait_for, trace_id, done)
    assert {"gateway", "messaging", "runtime"} <= {s.service for s in spans}


def test_a_function_call_and_its_execution_are_one_trace_P4_F4_R1(suite):
    """P4 F4 R1: a function call through the gateway, the execution the demo-funcs
    runtime claims for it and its finish are one trace: gateway, functions and runtime
    spans share the caller's trace id, and FinishExecution reaches functions as a child
    of the runtime's execution span."""
    trace_id, headers = _traceparent()
    call = {"action": "call", "crew": "demo", "function": "hello", "inputs": {"name": "Ada"}}
    _until_done(suite, _call_tool(suite, "functions", call, headers)["call_id"])

    def done(spans: list[Span]) -> bool:
        return {"gateway", "functions", "runtime"} <= {s.service for s in spans} and _back_from(
            spans, "execution crew:demo hello", "functions"
        )

    spans = suite.receiver.wait_for(trace_id, done)
    assert {s.instance for s in spans if s.service == "runtime"} == {"demo-funcs"}


def _samples(url: str, prefix: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples named `prefix...` that `url` serves: (name, labels) -> value."""
    return {key: v for key, v in metrics_at(url).samples.items() if key[0].startswith(prefix)}


def _once_counted(url: str, key: tuple[str, frozenset[tuple[str, str]]]) -> dict:
    """The runtime samples `url` serves once `key` counts one: the finish is counted just
    after the service has it, so allow a moment."""

    def counted() -> dict | None:
        values = _samples(url, "agentworks_runtime_")
        return values if values.get(key, 0) >= 1 else None

    return until_sync(counted, 30, every=0.2, what=f"{url} counts {key}")


def _until_done(suite: Suite, call_id: str) -> None:
    status = {"action": "status", "call_id": call_id, "wait_seconds": 20}
    deadline = time.monotonic() + 60
    while _call_tool(suite, "functions", status, {}).get("status") == "running":
        assert time.monotonic() < deadline, "the call did not end"


def test_the_runtimes_serve_their_own_metrics_P4_R1(suite):
    """P4 R1: each demo runtime serves its own metrics: turns or executions claimed and
    finished by outcome, how long a free slot waited for work, handler time, slots busy."""
    send = {"action": "send", "crew": "demo", "message": "metrics?"}
    receipt = _call_tool(suite, "messages", send, {})
    read = {"action": "read", "inbox_id": receipt["inbox_id"], "wait_seconds": 20}
    assert _call_tool(suite, "messages", read, {})["messages"], "no reply"
    call = {"action": "call", "crew": "demo", "function": "hello", "inputs": {"name": "Bo"}}
    _until_done(suite, _call_tool(suite, "functions", call, {})["call_id"])
    for name, kind in (("demo-runtime", "turn"), ("demo-funcs", "execution")):
        of_target = {("kind", kind), ("target", "crew:demo")}
        finished = (
            "agentworks_runtime_finished_total",
            frozenset({*of_target, ("outcome", "completed")}),
        )
        values = _once_counted(suite.metrics[name], finished)
        claimed = values[("agentworks_runtime_claimed_total", frozenset(of_target))]
        assert claimed >= values[finished]
        assert values[("agentworks_runtime_handler_seconds_count", frozenset(of_target))] >= 1
        by_kind = frozenset({("kind", kind)})
        assert values[("agentworks_runtime_claim_wait_seconds_count", by_kind)] >= 1
        assert values[("agentworks_runtime_busy_slots", by_kind)] == 0
