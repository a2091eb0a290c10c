"""Signing and sending one delivery (N2): Standard Webhooks headers from the
`standardwebhooks` package, one bounded attempt to the address the policy checked.

An attempt resolves the URL's host once and connects to the address it checked, with
the URL's host name as `Host` and TLS server name (so the certificate is checked for
the name, and no second resolution is made); it follows no redirect, holds no
connection open for another attempt (a pooled connection would skip the name check),
takes no proxy from the environment, stops after `timeout_seconds` and reads at most
`max_response_bytes` of the answer. A 2xx answer is delivered; anything else fails.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from standardwebhooks import Webhook

from agentworks.core import errors
from agentworks_gateway.webhooks_out.policy import AddressPolicy

SECRET_PREFIX = "whsec_"
USER_AGENT = "AgentWorks-Webhooks/1"
# How much of a failed answer is kept as the delivery's last error.
ERROR_CHARS = 300


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def event_body(event_type: str, timestamp: datetime, data: dict[str, Any]) -> bytes:
    """The JSON body of an event: `{"type", "timestamp", "data"}` (compact, UTF-8)."""
    document = {
        "type": event_type,
        "timestamp": timestamp.astimezone(UTC).isoformat(),
        "data": data,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def signed_headers(secret: str, delivery_id: str, body: bytes, now: datetime) -> dict[str, str]:
    """`webhook-id`, `webhook-timestamp` and `webhook-signature` for this attempt."""
    signature = Webhook(secret).sign(delivery_id, now, body)
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


@dataclass(frozen=True)
class Outcome:
    """How one attempt went: delivered (2xx), else the error and the HTTP status if any."""

    delivered: bool
    http_status: int | None = None
    error: str = ""


class Sender:
    """Sends attempts under the address policy, with its bounds."""

    def __init__(
        self, policy: AddressPolicy, *, timeout_seconds: float, max_response_bytes: int
    ) -> None:
        self.policy = policy
        self.timeout_seconds = timeout_seconds
        self.max_response_bytes = max_response_bytes
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout_seconds),
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def send(
        self,
        url: str,
        secret: str,
        delivery_id: str,
        body: bytes,
        extra_headers: dict[str, str] | None = None,
    ) -> Outcome:
        """One attempt: check the address again, post the signed body (with
        `extra_headers` besides the signed ones), read the answer."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                target = await self.policy.check(url)
                headers = {
                    **(extra_headers or {}),
                    **signed_headers(secret, delivery_id, body, datetime.now(UTC)),
                }
                headers["host"] = target.host_header
                request = self._client.build_request(
                    "POST",
                    target.connect_url,
                    content=body,
                    headers=headers,
                    extensions={"sni_hostname": target.host} if target.scheme == "https" else {},
                )
                response = await self._client.send(request, stream=True)
                try:
                    answer = await self._read(response)
                finally:
                    await response.aclose()
        except errors.AgentWorksError as exc:
            return Outcome(False, None, exc.message[:ERROR_CHARS])
        except TimeoutError:
            return Outcome(False, None, f"no answer within {self.timeout_seconds:g} s")
        except httpx.HTTPError as exc:
            return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS] or "error")
        except OSError as exc:
            return Outcome(False, None, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS])
        status = response.status_code
        if 200 <= status < 300:
            return Outcome(True, status)
        if 300 <= status < 400:
            where = response.headers.get("location", "")[:100]
            return Outcome(False, status, f"HTTP {status}: redirects are not followed ({where})")
        text = answer.decode("utf-8", "replace").strip()
        return Outcome(False, status, f"HTTP {status}: {text}"[:ERROR_CHARS])

    async def _read(self, response: httpx.Response) -> bytes:
        """At most `max_response_bytes` of the answer."""
        taken = bytearray()
        async for chunk in response.aiter_raw():
            taken += chunk[: self.max_response_bytes - len(taken)]
            if len(taken) >= self.max_response_bytes:
                break
        return bytes(taken)
