"""An HTTP transport that connects only where the address policy said it may.

`AddressPolicy.check` resolves a URL's host and checks every address; a client that then
connected by the host's name would resolve it a second time, and a host whose DNS answers
a public address to the check and a private one to the connection (DNS rebinding) would
reach what the policy refuses. Every request through `PinnedTransport` is checked when it
is sent (each redirect or interface URL too) and sent to the very address that was checked,
with the host's name kept in the Host header and, for https, in TLS's SNI and certificate
check.
"""

from __future__ import annotations

import httpx

from agentworks_gateway.webhooks_out.policy import AddressPolicy


class PinnedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, with every request checked and pinned to its checked address."""

    def __init__(self, policy: AddressPolicy, inner: httpx.AsyncBaseTransport | None = None):
        self.policy = policy
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = await self.policy.check(str(request.url))
        request.url = httpx.URL(target.connect_url)
        request.headers["host"] = target.host_header
        if target.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": target.host}
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
