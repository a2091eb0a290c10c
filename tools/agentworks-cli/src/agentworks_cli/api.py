"""The client of the gateway's HTTP tool API, for the CLI and its stdio MCP proxy.

`POST /api/v1/tools/<tool>` takes the tool's JSON arguments and answers with its
structured result, or with `{"error": {"code": "<gRPC status name>", "message": ...,
"reason": ..., "metadata": {...}}}` and the matching HTTP status (the gateway's side of
that is agentworks_gateway.api; the reasons are in docs/errors.md);
`GET /api/v1/tools` answers with the MCP tools and instructions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from agentworks.core.errors import Reason, error_object

API_PREFIX = "/api/v1/tools/"

# Seconds the HTTP client allows beyond a long-poll's own wait.
LONG_POLL_SLACK_SECONDS = 30.0


class ApiError(Exception):
    """A refusal from the gateway (or no gateway at all): its status name, its text, and
    its reason, metadata and retry delay when it has them."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        reason: str = "",
        metadata: dict[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.retry_after = retry_after

    @classmethod
    def of(cls, error: dict[str, Any]) -> ApiError:
        """The ApiError of an error object the gateway answered with."""
        metadata = error.get("metadata")
        retry_after = error.get("retry_after_seconds")
        return cls(
            str(error["code"]),
            str(error.get("message", "")),
            reason=str(error.get("reason") or ""),
            metadata={str(k): str(v) for k, v in metadata.items()}
            if isinstance(metadata, dict)
            else None,
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
        )

    def as_object(self) -> dict[str, Any]:
        """The error object, as the gateway gives it (`agentworks.core.errors.error_object`)."""
        return error_object(
            self.code,
            self.message,
            reason=self.reason,
            metadata=self.metadata,
            retry_after=self.retry_after,
        )


@dataclass(frozen=True)
class ToolListing:
    """The gateway's MCP tools (JSON, as listed) and the instructions it gives MCP clients."""

    tools: list[dict[str, Any]]
    instructions: str | None


class ApiClient:
    """Calls tools on a gateway's HTTP API with a bearer token."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "agentworks-cli"},
            timeout=timeout,
        )

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client (its base URL and bearer token set), for the event streams."""
        return self._http

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call `tool` with `args`; returns its result or raises ApiError."""
        wait = args.get("wait_seconds") or 0
        timeout = self.timeout + (wait + LONG_POLL_SLACK_SECONDS if wait else 0)
        return await self._request("POST", API_PREFIX + tool, args, timeout)

    async def list_tools(self) -> ToolListing:
        """What the gateway's `/mcp` tells clients (`GET /api/v1/tools`): its tools (name,
        description, inputSchema) and instructions (None from a gateway that sends none)."""
        path = API_PREFIX.rstrip("/")
        body = await self._request("GET", path, None, self.timeout)
        tools, instructions = body.get("tools"), body.get("instructions")
        if not isinstance(tools, list):
            raise ApiError("UNKNOWN", f"{self.url}{path} listed no tools")
        return ToolListing(tools, instructions if isinstance(instructions, str) else None)

    async def _request(
        self, method: str, path: str, args: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        """One request; the JSON answer, or ApiError with the gateway's code and words."""
        try:
            response = await self._http.request(method, path, json=args, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise ApiError(
                "DEADLINE_EXCEEDED",
                f"the gateway at {self.url} did not answer in {timeout:.0f} s",
                reason=Reason.UNREACHABLE,
                metadata={"url": self.url},
            ) from exc
        except httpx.TransportError as exc:
            raise ApiError(
                "UNAVAILABLE",
                f"cannot reach the gateway at {self.url} ({exc or type(exc).__name__}): "
                "start it with `agentworks up`, or pass --url / set AGENTWORKS_URL",
                reason=Reason.UNREACHABLE,
                metadata={"url": self.url},
            ) from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code == 200 and isinstance(body, dict):
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and "code" in error:
            raise ApiError.of(error)
        raise ApiError(
            "UNKNOWN",
            f"unexpected answer from {self.url}{path}: HTTP {response.status_code} "
            f"{response.text[:200]!r}; is --url the AgentWorks gateway?",
        )
