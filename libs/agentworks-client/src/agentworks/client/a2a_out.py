"""A turn's requests to external A2A agents through the gateway (X4).

`POST <gateway>/api/v1/a2a/{send,call}` with the turn's capability as the bearer token:
the gateway holds the operator's credential for the agent and talks to it; the answer
is `{"agent", "context_id", "task_id", "state"}`, a refusal the gateway's error as the
matching AgentWorksError (its code, reason and metadata kept).
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import grpc

from agentworks.core import errors

PATH = "/api/v1/a2a/"


def _refusal(exc: urllib.error.HTTPError) -> errors.AgentWorksError:
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
    except ValueError:
        error = {}
    message = error.get("message") or f"the gateway answered {exc.code} {exc.reason}"
    metadata = error.get("metadata")
    code = getattr(grpc.StatusCode, str(error.get("code") or "UNAVAILABLE"), None)
    return errors.from_status(
        code or grpc.StatusCode.UNAVAILABLE,
        message,
        reason=str(error.get("reason") or ""),
        metadata={str(k): str(v) for k, v in metadata.items()}
        if isinstance(metadata, dict)
        else None,
    )


def _post(url: str, capability: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {capability}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return dict(json.loads(response.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        raise _refusal(exc) from None
    except (OSError, ValueError) as exc:
        raise errors.Unavailable(
            f"the gateway could not be reached for an external agent ({exc}); retry shortly",
            reason=errors.Reason.UNREACHABLE,
        ) from None


async def a2a_request(
    gateway_url: str, capability: str, action: str, body: dict[str, Any], *, timeout: float = 60
) -> dict[str, Any]:
    """One `send` or `call` through the gateway, with the turn's capability."""
    url = gateway_url.rstrip("/") + PATH + action
    return await asyncio.to_thread(_post, url, capability, body, timeout)
