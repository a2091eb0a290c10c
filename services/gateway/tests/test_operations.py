"""The gateway as an operator runs it (G3, G4, P4): SIGTERM while requests wait, its own
database away, its settings' ranges, its metrics. Each gateway here is a real process
(`python -m agentworks_gateway`) whose JSON log lines the tests read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

import grpc
import httpx
import pytest
import sqlalchemy as sa

from agentworks.core.keys import KeyDirectory
from agentworks.core.settings import ConfigError
from agentworks.messaging.v1 import messaging_pb2, messaging_pb2_grpc
from agentworks.server.db import sqlalchemy_url
from agentworks.server.testing import free_port, scrape, until
from agentworks_gateway.config import Config
from agentworks_gateway.tokens import ensure_token, new_token

AGENTWORKS = os.path.join(os.path.dirname(sys.executable), "agentworks")
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
SHUTTING_DOWN = {
    "error": {
        "code": "UNAVAILABLE",
        "message": "the gateway is shutting down; retry",
        "reason": "DRAINING",
        "metadata": {},
    }
}


class GatewayProcess:
    """`async with GatewayProcess(env) as gw:` -> `gw.url`; `await gw.terminate()` sends
    SIGTERM and returns the seconds it took to exit; `gw.events` are its JSON log lines."""

    def __init__(self, env: dict[str, str]) -> None:
        base = {
            k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "GATEWAY_"))
        }
        self.env = {**base, "LOG_JSON": "true", **env}
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.stderr: list[str] = []
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GatewayProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentworks_gateway", env=self.env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read_stderr())
        async with asyncio.timeout(60):
            assert self.process.stdout is not None
            line = (await self.process.stdout.readline()).decode()
        assert line.startswith("gateway listening on "), (line, self.text)
        self.url = "http://" + line.split()[3]
        return self

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        async for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    @property
    def returncode(self) -> int | None:
        assert self.process is not None
        return self.process.returncode

    @property
    def text(self) -> str:
        return "".join(self.stderr)

    @property
    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.stderr:
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    async def terminate(self, timeout: float = 60) -> float:
        """SIGTERM; the seconds until the process exited."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(timeout):
            await self.process.wait()
            if self._reader is not None:
                await self._reader
        return time.monotonic() - started

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self._reader is not None:
            self._reader.cancel()


def gateway_env(
    database_url: str,
    signing_keys: KeyDirectory,
    messaging_address: str,
    functions_address: str = "127.0.0.1:1",
    **extra: str,
) -> dict[str, str]:
    return {
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "GATEWAY_MESSAGING_ADDRESS": messaging_address,
        "GATEWAY_FUNCTIONS_ADDRESS": functions_address,
        "GATEWAY_SCHEDULER_ADDRESS": "127.0.0.1:1",
        **signing_keys.env("gateway"),
        **extra,
    }


async def timed(awaitable) -> tuple[Any, float]:
    """The result and the monotonic time it came."""
    result = await awaitable
    return result, time.monotonic()


def tools_call(tool: str, args: dict[str, Any]) -> str:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": args},
        }
    )


def tool_calls(gw: GatewayProcess, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in gw.events
        if e.get("event") == "tool.called" and all(e.get(k) == v for k, v in match.items())
    ]


async def test_sigterm_returns_waiting_reads_at_once_G3_P4(
    database_url, signing_keys, messaging, functions, api, alice_token, echo, cli, mcp_session
):
    """G3 P4: with the default drain (30 s), SIGTERM during a CLI `messages read --wait 25`,
    an MCP `messages` read and an MCP `functions` call with wait_seconds answers each at
    once with what there is (an empty page, the call's receipt, one call only); the
    process exits in seconds, logs each call "ok", and logs no traceback."""
    alice = api(alice_token)
    sent = await alice.post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hi"}
    )
    inbox = sent.json()["inbox_id"]
    page = await alice.post("/api/v1/tools/messages", json={"action": "read", "inbox_id": inbox})
    cursor = page.json()["next_cursor"]
    waiting_reads = messaging.database.listener.waiting
    waiting_calls = functions.database.listener.waiting

    env = gateway_env(database_url, signing_keys, messaging.address, functions.address)
    async with GatewayProcess(env) as gw, mcp_session(f"{gw.url}/mcp", alice_token) as mcp:
        await mcp.list_tools()  # the client checks results against the listed schemas
        cli_env = {"AGENTWORKS_URL": gw.url, "AGENTWORKS_TOKEN": alice_token}
        read_cli = asyncio.create_task(
            timed(cli("messages", "read", "--inbox", inbox, "--after", cursor,
                      "--wait", "25", "--json", env=cli_env))
        )  # fmt: skip
        read_mcp = asyncio.create_task(
            timed(mcp.call_tool(
                "messages",
                {"action": "read", "inbox_id": inbox, "after": cursor, "wait_seconds": 25},
            ))
        )  # fmt: skip
        call_mcp = asyncio.create_task(
            timed(mcp.call_tool(
                "functions",
                {"action": "call", "crew": "demo", "function": "echo",
                 "inputs": {"text": "x"}, "wait_seconds": 25},
            ))
        )  # fmt: skip
        await until(
            lambda: (
                messaging.database.listener.waiting >= waiting_reads + 2
                and functions.database.listener.waiting >= waiting_calls + 1
            )
        )
        await asyncio.sleep(0.3)  # well into the wait
        signalled = time.monotonic()
        exit_seconds = await gw.terminate()
        async with asyncio.timeout(10):
            (code, out, err), cli_done = await read_cli
            read, read_done = await read_mcp
            called, call_done = await call_mcp

    assert gw.returncode == 0, gw.text
    assert exit_seconds < 8, f"the gateway took {exit_seconds:.1f} s to stop"
    for done in (cli_done, read_done, call_done):
        assert done - signalled < 5, f"answered {done - signalled:.1f} s after SIGTERM"
    assert code == 0, err
    assert json.loads(out)["messages"] == []
    assert not read.is_error, read.content
    assert read.structured_content["messages"] == []
    assert not called.is_error, called.content
    receipt = called.structured_content
    # Recovered by the retry key the gateway added, yet created by this request.
    assert receipt["created"] is True and receipt["status"] in ("queued", "running")
    assert "outcome" not in receipt
    engine = sa.create_engine(sqlalchemy_url(database_url), poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        calls = conn.execute(
            sa.text("SELECT id FROM functions.calls WHERE caller = 'user:alice'")
        ).all()
    engine.dispose()
    assert [str(c.id) for c in calls] == [receipt["call_id"]]  # asked twice, one call

    draining = [e for e in gw.events if e.get("event") == "service.draining"]
    assert draining and draining[0]["grace"] == 30
    assert len([e for e in gw.events if e.get("event") == "long_poll.ended_early"]) == 3
    for surface, tool, action in (
        ("api", "messages", "read"),
        ("mcp", "messages", "read"),
        ("mcp", "functions", "call"),
    ):
        logged = tool_calls(gw, surface=surface, tool=tool, action=action)
        assert [e["outcome"] for e in logged] == ["ok"], (surface, tool, logged)
    assert "Traceback" not in gw.text and "Exception in ASGI" not in gw.text, gw.text


class SlowMessaging(messaging_pb2_grpc.MessagingServiceServicer):
    """A messaging service whose Send of "quick" answers once `release` is set, and whose
    other Sends take a minute: calls still running when the gateway's drain ends."""

    def __init__(self) -> None:
        self.sends = 0
        self.release = asyncio.Event()

    async def Send(self, request, context):
        self.sends += 1
        if request.text != "quick":
            await asyncio.sleep(60)  # the slow service itself: these Sends take a minute
        await self.release.wait()
        return messaging_pb2.SendReceipt(
            accepted=True, message_id="m1", conversation_id="c1", inbox_id="i1"
        )


async def test_a_request_cut_at_the_end_of_the_drain_answers_503_and_logs_cancelled_G4_P4(
    database_url, signing_keys
):
    """G4 P4: after SIGTERM (GATEWAY_DRAIN_SECONDS=2) the gateway takes no new connection
    (refused, never a 503) while calls in flight go on; one that ends within the grace
    gets its real answer; the ones still running when the grace ends answer, not before,
    503 UNAVAILABLE "the gateway is shutting down; retry" as JSON (API and MCP, with
    Retry-After), are logged with outcome "cancelled", and leave no traceback."""
    grace = 2.0
    token = new_token()
    await asyncio.to_thread(ensure_token, database_url, token, "user:alice", set(), "t")
    slow = SlowMessaging()
    server = grpc.aio.server()
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(slow, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    send = {"action": "send", "crew": "demo", "message": "hi"}
    headers = {"Authorization": f"Bearer {token}"}
    list_tools = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})

    async def probe() -> httpx.Response:
        """A new request on a new connection."""
        async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=10) as fresh:
            return await fresh.post("/mcp", content=list_tools, headers=MCP_HEADERS)

    try:
        env = gateway_env(
            database_url, signing_keys, f"127.0.0.1:{port}", GATEWAY_DRAIN_SECONDS=str(grace)
        )
        async with (
            GatewayProcess(env) as gw,
            httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=60) as http,
        ):
            by_api = asyncio.create_task(timed(http.post("/api/v1/tools/messages", json=send)))
            by_mcp = asyncio.create_task(
                timed(http.post("/mcp", content=tools_call("messages", send), headers=MCP_HEADERS))
            )
            quick = asyncio.create_task(
                timed(http.post("/api/v1/tools/messages", json={**send, "message": "quick"}))
            )
            await until(lambda: slow.sends >= 3)
            signalled = time.monotonic()
            terminating = asyncio.create_task(gw.terminate())
            # The listener closes as the drain starts; a request that still got in is
            # served, never refused with a 503.
            early: list[httpx.Response] = []

            async def refused() -> bool:
                try:
                    early.append(await probe())
                except httpx.ConnectError:
                    return True  # refused: the listener is closed
                except httpx.TransportError:
                    pass  # taken by the kernel as the listener closed, then reset
                return False

            await until(refused, grace / 2, every=0.02, what="the listener closes")
            assert gw.returncode is None, "exited before the grace ended"
            slow.release.set()
            async with asyncio.timeout(10):
                quick_answer, quick_done = await quick
                (api_answer, api_done), (mcp_answer, mcp_done) = await by_api, await by_mcp
            exit_seconds = await terminating
    finally:
        await server.stop(0)

    assert gw.returncode == 0, gw.text
    assert exit_seconds < grace + 3, exit_seconds
    assert [a.status_code for a in early] == [200] * len(early), [a.text for a in early]
    assert quick_done - signalled < grace and quick_answer.status_code == 200, quick_answer.text
    assert quick_answer.json()["accepted"] is True
    for answer, done in ((api_answer, api_done), (mcp_answer, mcp_done)):
        assert grace - 0.25 <= done - signalled < grace + 3, done - signalled
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.headers["retry-after"] == "1"
        assert answer.json() == SHUTTING_DOWN
    api_outcomes = sorted(e["outcome"] for e in tool_calls(gw, tool="messages", surface="api"))
    assert api_outcomes == ["cancelled", "ok"]
    assert [e["outcome"] for e in tool_calls(gw, tool="messages", surface="mcp")] == ["cancelled"]
    cut = [e for e in gw.events if e.get("event") == "request.cut"]
    assert sorted(e["path"] for e in cut) == ["/api/v1/tools/messages", "/mcp"], cut
    assert "Traceback" not in gw.text and "Exception in ASGI" not in gw.text, gw.text


async def test_gateway_database_failures_are_logged_and_counted_G4_P4(
    fault_postgres, signing_keys, messaging
):
    """G4 P4: with its own PostgreSQL down, the gateway answers 503 UNAVAILABLE, logs a
    warning (at most one per 10 s per operation, the rest counted as `suppressed`),
    counts each failure in agentworks_gateway_database_errors_total and each refused
    request in agentworks_gateway_requests_refused_total, and serves again once the
    database is back. Its metrics have no long-poll or NOTIFY gauges (it does not LISTEN).
    """
    token = new_token()
    await asyncio.to_thread(ensure_token, fault_postgres.url, token, "user:alice", set(), "t")
    metrics_port = free_port()
    env = gateway_env(
        fault_postgres.url,
        signing_keys,
        messaging.address,
        GATEWAY_METRICS_LISTEN=f"127.0.0.1:{metrics_port}",
    )
    send = {"action": "send", "crew": "demo", "message": "hi"}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        GatewayProcess(env) as gw,
        httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=30) as http,
    ):
        assert (await http.get("/healthz")).status_code == 200
        before = await asyncio.to_thread(scrape, metrics_port)
        assert before.value("agentworks_db_pool_checked_out", service="gateway") is not None
        for gauge in ("agentworks_long_poll_waiters", "agentworks_notify_wakeups_total"):
            assert not [n for n, _ in before.samples if n == gauge], f"{gauge} is served"
        errors = "agentworks_gateway_database_errors_total"
        assert before.value(errors, operation="authenticate") == 0

        await asyncio.to_thread(fault_postgres.stop)
        answers = [await http.post("/api/v1/tools/messages", json=send) for _ in range(3)]
        answers.append(
            await http.post("/mcp", content=tools_call("messages", send), headers=MCP_HEADERS)
        )
        health = await http.get("/healthz")
        after = await asyncio.to_thread(scrape, metrics_port)

        await asyncio.to_thread(fault_postgres.start)

        async def served() -> bool:
            answer = await http.post("/api/v1/tools/tokens", json={"action": "list"})
            return answer.status_code != 503

        await until(served, 30, every=0.2, what="the gateway serves again")
        await gw.terminate()

    for answer in answers:
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "UNAVAILABLE" and "retry shortly" in error["message"], error
    assert health.status_code == 503
    assert after.value(errors, operation="authenticate") == 4
    assert after.value(errors, operation="healthz") == 1
    refused = "agentworks_gateway_requests_refused_total"
    assert after.value(refused, code="UNAVAILABLE", surface="api") == 3
    assert after.value(refused, code="UNAVAILABLE", surface="mcp") == 1
    warnings = [e for e in gw.events if e.get("event") == "database.unavailable"]
    # The delivery loops (webhooks out, A2A push, A2A outbound) poll on their own and may
    # warn too when the outage spans one of their rounds; the requests warn exactly once each.
    background = {"webhooks", "a2a_push", "a2a_out.claim"}
    answered = sorted(e["operation"] for e in warnings if e["operation"] not in background)
    assert answered == ["authenticate", "healthz"], warnings
    first = next(e for e in warnings if e["operation"] == "authenticate")
    assert first["level"] == "warning" and first["suppressed"] == 0
    assert "retry shortly" in first["reason"] and first["error"], first
    # Back: the token lookup works again (a "tokens" call by a non-operator is refused
    # as PERMISSION_DENIED, after its token was found).
    assert tool_calls(gw, tool="tokens")[-1]["outcome"] == "PERMISSION_DENIED"


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("GATEWAY_POOL_SIZE", "0", "must be between 1 and 1000"),
        ("GATEWAY_IDENTITY_TTL_SECONDS", "0", "must be between 10 and 300"),
        ("GATEWAY_IDENTITY_TTL_SECONDS", "-60", "must be between 10 and 300"),
        ("GATEWAY_IDENTITY_TTL_SECONDS", "301", "must be between 10 and 300"),
        ("GATEWAY_DRAIN_SECONDS", "-1", "must be between 0 and 3600"),
        ("GATEWAY_MAX_BODY_BYTES", "0", "must be between 1024 and"),
        ("GATEWAY_WEBHOOK_MAX_BODY_BYTES", str(2 * 1024 * 1024), "must be between 1 and 1048576"),
    ],
)
def test_gateway_settings_out_of_range_are_refused_G4_P4_T4(variable, value, says):
    """G4 P4 T4: a pool of 0 (every call would wait, then fail "database busy"), an identity
    lifetime under 10 s (every call "identity expired") or over the 300 s every service
    accepts, a negative drain, ... are refused
    naming the variable; the drain is 30 s unless set (longer than a 25 s long-poll)."""
    assert Config.from_env({}).service.drain_seconds == 30
    assert Config.from_env({}).service.pool_size == 10
    with pytest.raises(ConfigError) as refused:
        Config.from_env({variable: value})
    assert str(refused.value).startswith(f"{variable} {says}"), refused.value


async def test_gateway_process_with_pool_size_0_exits_2_naming_the_setting_G4_P4(
    database_url, signing_keys
):
    """G4 P4: GATEWAY_POOL_SIZE=0 stops the process at once (status 2), one line naming
    the variable, before it would answer /healthz 200 and fail every call."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "GATEWAY_"))},
        **gateway_env(database_url, signing_keys, "127.0.0.1:1", GATEWAY_POOL_SIZE="0"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentworks_gateway", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode == 2, err.decode()
    assert out == b""
    (line,) = err.decode().splitlines()
    failed = json.loads(line)
    assert failed["event"] == "service.start_failed" and failed["exit_status"] == 2
    assert failed["error"] == "GATEWAY_POOL_SIZE must be between 1 and 1000, got '0'"
