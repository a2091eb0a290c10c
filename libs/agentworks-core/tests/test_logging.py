"""Every line a service logs is one JSON object on stderr, the standard library's too (P4)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# A process that logs the ways a service's libraries do: structlog, a stdlib logger
# (uvicorn, grpc) with and without a traceback, asyncio's "Task exception was never
# retrieved", a warning, an exception in a thread and one nothing catches.
SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, logging, threading, warnings
    import structlog
    from agentworks.core.logging import configure_logging

    configure_logging("demo", level="info", json=True)
    structlog.get_logger("x").info("hello", answer=42)
    logging.getLogger("uvicorn.error").error("boom %s", "here")
    logging.getLogger("grpc").info("library chatter below WARNING stays out")
    try:
        1 / 0
    except ZeroDivisionError:
        logging.getLogger("grpc").exception("stdlib failed")
        structlog.get_logger("x").exception("structlog failed")

    async def bad():
        raise RuntimeError("never retrieved")

    async def main():
        task = asyncio.ensure_future(bad())
        await asyncio.sleep(0.01)  # the task runs and fails, unobserved: what is logged
        del task

    asyncio.run(main())
    gc.collect()
    warnings.warn("a warning")
    thread = threading.Thread(target=lambda: 1 / 0, name="worker")
    thread.start()
    thread.join()
    raise ValueError("nothing caught this")
    """
)


def test_every_log_line_is_one_json_object_on_stderr_P4():
    """P4: with LOG_JSON on, structlog events and standard-library records (uvicorn's
    errors, asyncio's unretrieved task exceptions, warnings, uncaught exceptions in any
    thread) are each one JSON object on one stderr line, tagged with the service, with
    any traceback as the `exception` field; nothing is written to stdout."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    events = [json.loads(line) for line in lines]  # fails on any line that is not JSON
    assert all(e["service"] == "demo" and e["level"] and e["timestamp"] for e in events)
    by_event = {e["event"].split("\n")[0]: e for e in events}
    assert by_event["hello"]["answer"] == 42
    assert by_event["boom here"] | {"timestamp": None} == {
        "event": "boom here",
        "logger": "uvicorn.error",
        "level": "error",
        "service": "demo",
        "timestamp": None,
    }
    assert not any("chatter" in e["event"] for e in events)
    tracebacks = {
        "stdlib failed": "ZeroDivisionError",
        "structlog failed": "ZeroDivisionError",
        "Task exception was never retrieved": "RuntimeError: never retrieved",
        "thread.uncaught_exception": "ZeroDivisionError",
        "process.uncaught_exception": "ValueError: nothing caught this",
    }
    for event, error in tracebacks.items():
        assert by_event[event]["exception"].startswith("Traceback"), event
        assert error in by_event[event]["exception"], event
    assert by_event["thread.uncaught_exception"]["thread"] == "worker"
    assert by_event["process.uncaught_exception"]["level"] == "critical"
    assert by_event["Task exception was never retrieved"]["logger"] == "asyncio"
    assert "a warning" in next(e["event"] for e in events if e.get("logger") == "py.warnings")
    assert len(events) == 8
