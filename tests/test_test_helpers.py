"""The house rules of the tests: one helper for each kind of waiting, port and scrape.

`agentworks.server.testing` holds `until` / `until_sync` (wait for a condition with a
deadline), `free_port` / `free_port_block` and `scrape` / `scrape_until` (a process's
/metrics). A test file that writes its own drifts from them (another interval, another
timeout, another failure message), so these tests fail when one does.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from agentworks.server.testing import free_port, free_port_block, scrape, until, until_sync

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The shared helpers, and the names a copy of one would take.
SHARED = {"until", "until_sync", "free_port", "free_port_block", "scrape", "scrape_until"}
COPIES = SHARED | {f"_{name}" for name in SHARED}


def _test_files() -> list[pathlib.Path]:
    """Every Python file of every test tree (the root `tests/`, each package's `tests/`)
    and every conftest.py."""
    trees = [ROOT / "tests", *ROOT.glob("*/*/tests")]
    files = {p for tree in trees for p in tree.rglob("*.py")}
    files |= {p for p in ROOT.glob("**/conftest.py") if ".venv" not in p.parts}
    return sorted(p for p in files if "__pycache__" not in p.parts)


def _copies(path: pathlib.Path) -> list[str]:
    """`name:line` of each function this file defines under a helper's name (at any depth,
    sync or async)."""
    return [
        f"{node.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in COPIES
    ]


def test_no_test_file_writes_its_own_until_free_port_or_scrape():
    """House rule (no SPEC id speaks of test helpers): waiting, free ports and /metrics
    scrapes come from `agentworks.server.testing`; no test file defines its own."""
    files = _test_files()
    assert len(files) > 50, "the test trees were not found"
    copies = {str(p.relative_to(ROOT)): found for p in files if (found := _copies(p))}
    assert not copies, f"use agentworks.server.testing's helpers instead of copies: {copies}"


def test_the_rule_sees_a_copy_at_any_depth(tmp_path):
    """House rule: the check above sees a nested async copy and a private one."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "def test_x():\n"
        "    async def until(check):\n"
        "        pass\n\n\n"
        "def _free_port():\n"
        "    pass\n"
    )
    assert sorted(_copies(sample)) == ["_free_port:6", "until:2"]


async def test_until_returns_the_first_true_answer_and_fails_naming_what_it_waited_for():
    """House rule: `until` takes plain and async checks, returns the check's answer, awaits
    `between` instead of sleeping when given, and fails with an AssertionError at the
    deadline naming what it waited for."""
    answers = iter([0, 0, "done"])
    assert await until(lambda: next(answers), 5, every=0.01) == "done"

    async def ready() -> list[int]:
        return [1]

    assert await until(ready, 1) == [1]
    woken: list[int] = []

    async def tick() -> None:
        woken.append(1)

    assert await until(lambda: len(woken) >= 3, 5, between=tick)
    with pytest.raises(AssertionError, match=r"not reached within 0\.1 s: the sky falls"):
        await until(lambda: False, 0.1, what="the sky falls")
    with pytest.raises(AssertionError, match=r"not reached within 0\.1 s"):
        until_sync(lambda: None, 0.1)


def test_free_ports_are_free_and_a_scrape_reads_a_metrics_page():
    """House rule: `free_port` and `free_port_block` give ports one may bind, and `scrape`
    parses a /metrics page served on one of them."""
    import http.server
    import socket
    import threading

    base = free_port_block(3)
    for port in (free_port(), base, base + 1, base + 2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'# TYPE x_total counter\nx_total{a="1"} 2.0\nx_total{a="2"} 3.0\n'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", free_port()), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = scrape(server.server_port)
    finally:
        server.shutdown()
        server.server_close()
    assert page.value("x_total", a="1") == 2.0
    assert page.value("x_total", a="3") is None
    assert page.total("x_total") == 5.0
