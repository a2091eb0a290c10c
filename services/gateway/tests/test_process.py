"""The gateway as a real process, the way `agentworks up` and compose start it (G4, P4)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import httpx

from agentworks_gateway.tokens import ensure_token, new_token


async def test_gateway_process_serves_and_drains_on_sigterm_G4_P4(
    database_url, signing_keys, messaging
):
    """G4 P4: `python -m agentworks_gateway` listens, answers /healthz and /api, logs JSON
    lines, and exits 0 on SIGTERM."""
    token = new_token()
    await asyncio.to_thread(ensure_token, database_url, token, "user:ops", {"operator"}, "t")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "GATEWAY_"))},
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "GATEWAY_MESSAGING_ADDRESS": messaging.address,
        **signing_keys.env("gateway"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentworks_gateway", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(30):
            assert process.stdout is not None
            line = (await process.stdout.readline()).decode()
        assert line.startswith("gateway listening on 127.0.0.1:"), line
        url = "http://" + line.split()[3]
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await client.get("/healthz")).json() == {"status": "ok"}
            listed = await client.post(
                "/api/v1/tools/tokens",
                json={"action": "list"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert listed.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            _, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    events = [json.loads(x) for x in err.decode().splitlines() if x.startswith("{")]
    tool_calls = [e for e in events if e["event"] == "tool.called"]
    assert tool_calls and tool_calls[0]["tool"] == "tokens" and tool_calls[0]["request_id"]
    assert any(e["event"] == "server.stopped" for e in events)
