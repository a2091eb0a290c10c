"""How a service process reports a start that fails (P4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from agentworks.server.service import bound_address

# A service whose start fails in a way nobody planned for.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from agentworks.core.settings import Env
    from agentworks.server.config import ServiceConfig
    from agentworks.server.service import main_for

    env = Env("DEMO", {
        "DEMO_LISTEN": "127.0.0.1:0",
        "DEMO_DATABASE_URL": "postgresql://aw:s3cret@127.0.0.1:1/x",
        **json.loads(sys.argv[1]),
    })

    async def start():
        raise KeyError("something nobody expected")

    main_for(ServiceConfig.from_env("demo", 1, env), start)
    """
)


def test_an_unexpected_start_failure_is_one_json_line_with_its_traceback_P4(signing_keys):
    """P4: an error nobody planned for during the start is still one
    `service.start_failed` line (exit status 1), its traceback in the `exception` field."""
    keys = json.dumps(signing_keys.env("service:demo"))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, keys], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    event = json.loads(line)
    assert event["event"] == "service.start_failed"
    assert event["error"] == "KeyError: 'something nobody expected'"
    assert event["exit_status"] == 1
    assert event["exception"].startswith("Traceback")
    assert "something nobody expected" in event["exception"]


def test_the_ready_address_keeps_the_listen_host_P4():
    """P4: `service.ready` reports the configured host with the port actually bound."""
    assert bound_address("0.0.0.0:0", 50123) == "0.0.0.0:50123"
    assert bound_address("[::]:0", 7) == "[::]:7"
    assert bound_address("localhost:50051", 50051) == "localhost:50051"
