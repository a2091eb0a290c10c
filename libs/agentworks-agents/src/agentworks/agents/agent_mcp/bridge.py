"""The stdio bridge (L2): an MCP server on stdin/stdout for an agent program, relaying
each message to its turn's or execution's endpoint.

    python -m agentworks.agents.agent_mcp stdio
    python3 -I -S /run/agentworks/mcp_bridge.py stdio      # inside the sandbox

An MCP-capable agent launches it from its `mcp.json` (the command runner writes that
file, `AGENTWORKS_MCP_CONFIG`); it reads `AGENTWORKS_MCP_SOCKET` (or `AGENTWORKS_MCP_URL`
for a loopback TCP endpoint) and `AGENTWORKS_MCP_TOKEN` from its environment (the
file's `env` gives them), else from the `agentworks` entry of the file that
`AGENTWORKS_MCP_CONFIG` names. Each line
of stdin (a JSON-RPC message) is POSTed to the endpoint's Streamable HTTP `/mcp`; each
answer is written to stdout as one line. A request the endpoint cannot answer (the turn
or execution has ended and the endpoint is gone, a refused token) gets a JSON-RPC
error saying so, so the agent is never left waiting. It ends when stdin closes.

The standard library only, and no package of the suite: the sandbox shows this file
alone (bound read-only at `/run/agentworks/mcp_bridge.py`), run by the system's Python.
The Unix socket helpers below are the endpoint's too (`server.py`).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

CONFIG_VARIABLE = "AGENTWORKS_MCP_CONFIG"
SOCKET_VARIABLE = "AGENTWORKS_MCP_SOCKET"
URL_VARIABLE = "AGENTWORKS_MCP_URL"
TOKEN_VARIABLE = "AGENTWORKS_MCP_TOKEN"

# Where the sandbox shows this file, read-only, beside its init (`sandbox.Sandbox`).
SANDBOX_PATH = "/run/agentworks/mcp_bridge.py"

# A tool call may wait for a human's answer (ask_human) for a long time.
REQUEST_TIMEOUT_SECONDS = 3600.0

# sockaddr_un's sun_path is 108 bytes with its terminating NUL.
MAX_SOCKET_PATH = 107

# JSON-RPC's code for an error of the server (implementation-defined range).
ENDPOINT_ERROR = -32000

# MCP 2026-07-28 over HTTP: each request names its protocol version (in its `_meta`),
# method and (for these methods) the name it acts on in headers too.
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@contextlib.contextmanager
def _short(path: str | os.PathLike[str]) -> Iterator[str]:
    """A socket address for `path` at any length: a longer path is reached through its
    folder's descriptor, `/proc/self/fd/<n>/<name>`, which resolves to the same place."""
    text = os.fspath(path)
    if len(text.encode()) <= MAX_SOCKET_PATH:
        yield text
        return
    folder, name = os.path.split(text)
    descriptor = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{descriptor}/{name}"
    finally:
        os.close(descriptor)


def _unix(path: str | os.PathLike[str], act: Callable[[socket.socket, str], None]) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _short(path) as address:
            act(sock, address)
    except BaseException:
        sock.close()
        raise
    return sock


def bind_unix(path: str | os.PathLike[str], *, owner: int | None = None) -> socket.socket:
    """A Unix socket bound at `path` (an old one there replaced), mode 0600, owned by
    `owner` when given (the sandbox's user)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)

    def bind(sock: socket.socket, address: str) -> None:
        sock.bind(address)
        os.chmod(address, 0o600)
        if owner is not None and owner != os.geteuid():
            os.chown(address, owner, -1)

    return _unix(path, bind)


def connect_unix(path: str | os.PathLike[str], timeout: float | None = None) -> socket.socket:
    """A socket connected to the Unix socket at `path`."""

    def connect(sock: socket.socket, address: str) -> None:
        sock.settimeout(timeout)
        sock.connect(address)

    return _unix(path, connect)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = connect_unix(self.path, self.timeout)


class Bridge:
    """Relays JSON-RPC lines between stdio and one endpoint."""

    def __init__(self, *, socket_path: str = "", url: str = "", token: str = "") -> None:
        if not socket_path and not url:
            raise ValueError(
                f"no AgentWorks MCP endpoint: set {SOCKET_VARIABLE} (or {URL_VARIABLE}); the "
                "command runner does for the turns and executions it runs"
            )
        self.socket_path = socket_path
        self.url = urllib.parse.urlsplit(url) if url else None
        self.token = token
        self.protocol_version = ""
        self._out = threading.Lock()

    def _connection(self) -> tuple[http.client.HTTPConnection, str]:
        if self.url is None:
            return _UnixConnection(self.socket_path, REQUEST_TIMEOUT_SECONDS), "/mcp"
        connection = http.client.HTTPConnection(
            self.url.hostname or "127.0.0.1", self.url.port or 80, timeout=REQUEST_TIMEOUT_SECONDS
        )
        return connection, self.url.path or "/mcp"

    def headers(self, message: Any) -> dict[str, str]:
        """The HTTP headers of one message: its protocol version, and for a request of
        the 2026-07-28 revision its routing headers (the endpoint checks they match)."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get(PROTOCOL_VERSION_META), str):
            method = str(message.get("method", ""))
            headers["MCP-Protocol-Version"] = meta[PROTOCOL_VERSION_META]
            headers["Mcp-Method"] = method
            name = params.get(NAME_BEARING.get(method, ""))  # type: ignore[union-attr]
            if isinstance(name, str):
                headers["Mcp-Name"] = _header_value(name)
        return headers

    def write(self, message: Any) -> None:
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._out:
            sys.stdout.write(line)
            sys.stdout.flush()

    def relay(self, line: bytes) -> None:
        """Send one message on; write what comes back (or the error saying why not).

        An event-stream answer (a tool call that asked for progress) is written event
        by event as it arrives, so the progress reaches the agent while the tool waits.
        """
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.write(_error(None, -32700, f"not JSON: {exc}"))
            return
        unanswered = {m.get("id") for m in _messages(message) if "method" in m and "id" in m}
        try:
            connection, path = self._connection()
            try:
                connection.request("POST", path, body=line, headers=self.headers(message))
                response = connection.getresponse()
                status, kind = response.status, response.getheader("Content-Type", "")
                if status == 200 and kind.startswith("text/event-stream"):
                    for answer in _events(response):
                        self.answer(answer, unanswered)
                    return
                body = response.read()
            finally:
                connection.close()
        except OSError as exc:
            for request_id in unanswered:
                self.write(_error(request_id, ENDPOINT_ERROR, _gone(exc)))
            return
        if status == 202 or not body.strip():
            return
        if status != 200:
            text = body.decode(errors="replace").strip()[:500]
            for request_id in unanswered:
                refused = f"the endpoint refused ({status}): {text}"
                self.write(_error(request_id, ENDPOINT_ERROR, refused))
            return
        self.answer(json.loads(body), unanswered)

    def answer(self, answer: Any, unanswered: set[Any]) -> None:
        """Write one message from the endpoint (noting the protocol version it agreed)."""
        for reply in _messages(answer):
            if "method" not in reply:
                unanswered.discard(reply.get("id"))
            version = (reply.get("result") or {}).get("protocolVersion")
            if isinstance(version, str):
                self.protocol_version = version
        self.write(answer)

    def run(self, stdin: Any) -> None:
        """Relay until stdin ends, each message in a thread of its own (a tool call that
        waits for a human does not hold the others); then wait for the answers."""
        threads = []
        for line in stdin:
            if not line.strip():
                continue
            thread = threading.Thread(target=self.relay, args=(line,), daemon=True)
            thread.start()
            threads.append(thread)
            threads = [t for t in threads if t.is_alive()]
        for thread in threads:
            thread.join()


def _header_value(value: str) -> str:
    """`value` as a header carries it: printable ASCII as it is, else base64 in the
    `=?base64?...?=` form the endpoint decodes."""
    plain = value.isascii() and value.isprintable() and value == value.strip()
    if plain and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def _events(response: Any) -> Iterator[Any]:
    """The JSON messages of a server-sent event stream, each as soon as its event ends
    (comments, such as keep-alive pings, and the other fields are skipped)."""
    data: list[str] = []
    for raw in response:
        text = raw.decode(errors="replace").rstrip("\r\n")
        if text:
            if text.startswith("data:"):
                data.append(text[5:].removeprefix(" "))
            continue
        if data and "".join(data).strip():
            yield json.loads("\n".join(data))
        data = []
    if data and "".join(data).strip():
        yield json.loads("\n".join(data))


def _messages(message: Any) -> list[dict[str, Any]]:
    items = message if isinstance(message, list) else [message]
    return [item for item in items if isinstance(item, dict)]


def _error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def _gone(exc: OSError) -> str:
    return (
        "the AgentWorks MCP endpoint cannot be reached: the turn or execution it served "
        f"has ended, or it was never this process's ({type(exc).__name__}: {exc})"
    )


def endpoint_settings(environ: dict[str, str]) -> dict[str, str]:
    """The endpoint's socket (or URL) and token: from `environ`, else from the
    `agentworks` entry's `env` in the `AGENTWORKS_MCP_CONFIG` file."""
    settings = {
        "socket_path": environ.get(SOCKET_VARIABLE, ""),
        "url": environ.get(URL_VARIABLE, ""),
        "token": environ.get(TOKEN_VARIABLE, ""),
    }
    config = environ.get(CONFIG_VARIABLE, "")
    if settings["token"] or not config:
        return settings
    with open(config) as file:
        entry = json.load(file).get("mcpServers", {}).get("agentworks", {})
    given = entry.get("env") or {}
    return {
        "socket_path": given.get(SOCKET_VARIABLE, settings["socket_path"]),
        "url": given.get(URL_VARIABLE, settings["url"]),
        "token": given.get(TOKEN_VARIABLE, ""),
    }


def main(argv: list[str] | None = None) -> int:
    """`stdio`: relay stdin/stdout to the endpoint in the environment."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["stdio"]:
        print("usage: python -m agentworks.agents.agent_mcp stdio", file=sys.stderr)
        return 2
    try:
        bridge = Bridge(**endpoint_settings(dict(os.environ)))
    except (OSError, ValueError) as exc:
        print(f"agentworks mcp bridge: {exc}", file=sys.stderr)
        return 2
    bridge.run(sys.stdin.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
