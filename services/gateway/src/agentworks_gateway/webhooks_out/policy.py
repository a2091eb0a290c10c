"""Which addresses webhooks out may reach (N2; docs/operations.md, Webhooks out).

A URL is https (or http to an address the operator allowed), with a host and no
credentials. Its host is resolved, and every address it resolves to must be public: an
address that is loopback, private (RFC 1918, fc00::/7, CGNAT), link-local (169.254.0.0/16,
the cloud metadata address among them, fe80::/10), multicast, unspecified or otherwise
not global is refused unless it is in `GATEWAY_WEBHOOKS_ALLOW`. The check runs at
registration and again at each send, which connects to the address it checked (no
second resolution a DNS rebinding could answer differently).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass

from agentworks.core import errors
from agentworks_gateway.webhooks_out.settings import IPNetwork

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_CHARS = 2048
ALLOW_SETTING = "GATEWAY_WEBHOOKS_ALLOW"


class AddressRefused(errors.InvalidArgument):
    """The URL's address is one the operator's policy does not allow."""


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (`address`) and what to ask for there."""

    url: str
    scheme: str
    host: str
    port: int
    path: str
    address: str

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def connect_url(self) -> str:
        """The URL with the checked address in place of the host name."""
        address = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{address}:{self.port}{self.path}"


def _bad_url(url: str, why: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(
        f"url {url[:200]!r} {why}; nothing was stored",
        reason=errors.Reason.FIELD_RULE,
        metadata=errors.rule_meta("url", "uri"),
    )


def _category(ip: IPAddress) -> str | None:
    """Why an address is not public, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return _category(ip.ipv4_mapped)
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "not global (reserved or shared)"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """The operator's policy: public addresses, plus the networks in `allow`."""

    allow: tuple[IPNetwork, ...] = ()

    def allowed(self, ip: IPAddress) -> bool:
        """Whether the operator listed a network holding this address."""
        plain = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        return any(ip in net or (plain is not None and plain in net) for net in self.allow)

    def parse(self, url: str) -> urllib.parse.SplitResult:
        """The URL's parts, or InvalidArgument saying what is wrong with it."""
        if not isinstance(url, str) or not url:
            raise _bad_url(str(url), "is empty: give the endpoint's https:// URL")
        if len(url) > MAX_URL_CHARS:
            raise errors.InvalidArgument(
                f"url is {len(url)} characters, more than {MAX_URL_CHARS}; nothing was stored",
                reason=errors.Reason.FIELD_RULE,
                metadata=errors.rule_meta("url", "string.max_len", MAX_URL_CHARS),
            )
        if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
            raise _bad_url(url, "has spaces or control characters")
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - raises for a port out of range
        except ValueError as exc:
            raise _bad_url(url, f"is not a URL ({exc})") from None
        if parts.scheme not in ("https", "http"):
            raise _bad_url(url, "must start with https:// (http:// only to allowed addresses)")
        if not parts.hostname:
            raise _bad_url(url, "has no host")
        if parts.username is not None or parts.password is not None:
            raise _bad_url(url, "has credentials in it: the signature authenticates")
        if parts.fragment:
            raise _bad_url(url, "has a #fragment, which is never sent")
        return parts

    async def check(self, url: str) -> Target:
        """Resolve the URL's host and check every address; the target to connect to.

        Raises InvalidArgument for a bad URL or a host that does not resolve, and
        AddressRefused for an address the policy does not allow.
        """
        parts = self.parse(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = await resolve(url, host, port)
        for ip in addresses:
            category = _category(ip)
            if category is not None and not self.allowed(ip):
                raise AddressRefused(
                    f"url {url[:200]!r}: {host} resolves to {ip}, a {category} address, "
                    f"which webhooks may not reach; an operator can allow it in "
                    f"{ALLOW_SETTING} (e.g. {ip}/{ip.max_prefixlen})",
                    reason=errors.Reason.INVALID_VALUE,
                    metadata={
                        "field": "url",
                        "rule": "address_policy",
                        "address": str(ip),
                        "category": category,
                        "setting": ALLOW_SETTING,
                    },
                )
            if parts.scheme == "http" and not self.allowed(ip):
                raise AddressRefused(
                    f"url {url[:200]!r}: plain http is allowed only to addresses an "
                    f"operator allowed in {ALLOW_SETTING}; use https",
                    reason=errors.Reason.INVALID_VALUE,
                    metadata={
                        "field": "url",
                        "rule": "https_required",
                        "address": str(ip),
                        "setting": ALLOW_SETTING,
                    },
                )
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return Target(url, parts.scheme, host, port, path, str(addresses[0]))


async def resolve(url: str, host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal is itself), InvalidArgument when
    it resolves to none."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (OSError, UnicodeError) as exc:
        raise errors.InvalidArgument(
            f"url {url[:200]!r}: the host {host!r} does not resolve ({exc})",
            reason=errors.Reason.INVALID_VALUE,
            metadata={"field": "url", "rule": "resolves"},
        ) from None
    found: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise errors.InvalidArgument(
            f"url {url[:200]!r}: the host {host!r} has no address",
            reason=errors.Reason.INVALID_VALUE,
            metadata={"field": "url", "rule": "resolves"},
        )
    return found
