"""What every console page shares: the session check, the CSRF and Origin checks, tool
calls as the signed-in identity, forms, and rendering (V3).

A page handler is `async def handler(console, request, session) -> Response`, wrapped by
`Console.page` (GET) or `Console.action` (POST). Both resume the session from its
cookie; an action also needs the request's `Origin` to be the console's own and the
session's CSRF token in the form (`csrf`) or the `X-CSRF-Token` header. A page reaches
the services only through the gateway's tools (`tools.call_tool`) as the session's
identity, so it has exactly the access rules of `/api`.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from agentworks.core import errors
from agentworks_gateway import tools
from agentworks_gateway.api import HTTP_STATUS
from agentworks_gateway.console import present
from agentworks_gateway.service import Gateway
from agentworks_gateway.sessions import Session, Sessions

log = structlog.get_logger("agentworks.gateway.console")

PREFIX = "/console"
STATIC = Path(__file__).with_name("static")
SESSION_COOKIE = "aw_console"
CSRF_HEADER = "x-csrf-token"
# A console form is a few fields; a chat message or function inputs at most this.
MAX_FORM_BYTES = 256 * 1024

# No inline script, no eval, nothing from elsewhere: htmx and the stylesheet are ours.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

Handler = Callable[["Console", Request, Session], Awaitable[Response]]


class Refused(errors.PermissionDenied):
    """A console request refused before any tool ran (Origin, CSRF, Host)."""


def host_allowed(host: str, patterns: tuple[str, ...]) -> bool:
    """Whether a Host header matches the gateway's allowed hosts (`name:*` = any port)."""
    if "*" in patterns:
        return True
    for pattern in patterns:
        if pattern.endswith(":*"):
            name, _, port = host.rpartition(":")
            if name == pattern[:-2] and port.isdigit():
                return True
        elif host == pattern:
            return True
    return False


class Console:
    """The console of one gateway process: its sessions and its templates."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.sessions = Sessions(gateway)
        self.templates = Environment(
            loader=PackageLoader("agentworks_gateway.console", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["pretty"] = lambda value: json.dumps(value, indent=2)
        self.templates.filters["short"] = lambda value, n=12: (value or "")[:n]
        self.templates.filters["quote"] = lambda value: urllib.parse.quote(str(value), safe="")
        self.templates.filters["when"] = present.when
        self.templates.filters["copy_id"] = present.copy_id
        self.templates.filters["seconds"] = present.duration
        self.templates.globals["prefix"] = PREFIX
        self.templates.globals["timeline"] = present.timeline

    # ------------------------------------------------------------------ rendering

    def render(
        self,
        request: Request,
        template: str,
        session: Session | None,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        """A template as an HTML response with the console's security headers."""
        html = self.templates.get_template(template).render(
            request=request, session=session, path=request.url.path, **context
        )
        return HTMLResponse(
            html, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})}
        )

    def refusal(
        self, request: Request, session: Session | None, exc: errors.AgentWorksError
    ) -> Response:
        """A refusal as the error page (or, for htmx, as an alert fragment)."""
        status = HTTP_STATUS.get(exc.code.name, 500)
        if exc.code.name == "UNAUTHENTICATED":
            return self.sign_in_page(request, exc.message, status=401)
        template = "_alert.html" if request.headers.get("hx-request") else "error.html"
        return self.render(
            request, template, session, status=status, code=exc.code.name, message=exc.message
        )

    def sign_in_page(self, request: Request, error: str = "", *, status: int = 200) -> Response:
        """The sign-in form; htmx is told to load it as a page."""
        if request.headers.get("hx-request"):
            return Response(status_code=status, headers={"HX-Redirect": f"{PREFIX}/sign-in"})
        target = request.url.path if request.method == "GET" else f"{PREFIX}/"
        if request.url.query and request.method == "GET":
            target += "?" + request.url.query
        return self.render(request, "sign_in.html", None, status=status, error=error, next=target)

    # ---------------------------------------------------------------- tool calls

    async def tool(self, session: Session, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """One gateway tool call as the session's identity (the same rules as `/api`)."""
        return await tools.call_tool(self.gateway, session.identity, name, args, mcp=False)

    # ------------------------------------------------------------------- checks

    def check_host(self, request: Request) -> None:
        """Refuse a Host the gateway does not serve (DNS rebinding)."""
        host = request.headers.get("host", "")
        if not host_allowed(host, self.gateway.config.allowed_hosts):
            raise Refused(
                f"host {host!r} is not one this gateway serves: open the console at an allowed "
                "host (GATEWAY_ALLOWED_HOSTS)"
            )

    def check_origin(self, request: Request) -> None:
        """Refuse a state-changing request whose Origin is not the console's own."""
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if not origin:
            raise Refused(
                "this request has no Origin header: console actions are taken from the "
                "console's own pages in a browser"
            )
        if origin != own:
            raise Refused(
                f"request from origin {origin!r} refused: console actions are taken only "
                f"from the console's own pages ({own})"
            )

    async def form(self, request: Request) -> dict[str, str]:
        """The request's urlencoded form (one value per name), read within MAX_FORM_BYTES."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
            raise errors.InvalidArgument(
                f"the form is larger than {MAX_FORM_BYTES} bytes",
                reason=errors.Reason.REQUEST_LIMIT,
                metadata={"limit": str(MAX_FORM_BYTES)},
            )
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise errors.InvalidArgument(
                    f"the form is larger than {MAX_FORM_BYTES} bytes",
                    reason=errors.Reason.REQUEST_LIMIT,
                    metadata={"limit": str(MAX_FORM_BYTES)},
                )
        try:
            pairs = urllib.parse.parse_qsl(
                body.decode(), keep_blank_values=True, strict_parsing=False
            )
        except UnicodeDecodeError:
            raise errors.InvalidArgument(
                "the form is not UTF-8", reason=errors.Reason.MALFORMED
            ) from None
        return dict(pairs)

    # ------------------------------------------------------------------ wrappers

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET page for a signed-in session."""

        async def endpoint(request: Request) -> Response:
            session = None
            try:
                self.check_host(request)
                session = await self.sessions.resume(request.cookies.get(SESSION_COOKIE))
                with structlog.contextvars.bound_contextvars(principal=session.identity.principal):
                    return await handler(self, request, session)
            except errors.AgentWorksError as exc:
                signed_out = exc.code.name == "UNAUTHENTICATED" and not request.cookies.get(
                    SESSION_COOKIE
                )
                if signed_out and (to_sign_in := self.to_sign_in(request)):
                    return to_sign_in
                return self.refusal(request, session, exc)

        return endpoint

    def to_sign_in(self, request: Request) -> Response | None:
        """Never signed in (no cookie): a page is a redirect to the sign-in form, which
        comes back here after, instead of a 401 (a browser logs that as an error). Not
        for htmx or an event stream, which are told as before."""
        if request.headers.get("hx-request") or "text/event-stream" in request.headers.get(
            "accept", ""
        ):
            return None
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        query = urllib.parse.urlencode({"next": target})
        return RedirectResponse(
            f"{PREFIX}/sign-in?{query}", status_code=303, headers=SECURITY_HEADERS
        )

    def action(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A state-changing POST: signed in, from the console's Origin, with the CSRF token."""

        async def endpoint(request: Request) -> Response:
            session = None
            try:
                self.check_host(request)
                self.check_origin(request)
                session = await self.sessions.resume(request.cookies.get(SESSION_COOKIE))
                form = await self.form(request)
                request.state.form = form
                presented = request.headers.get(CSRF_HEADER) or form.get("csrf")
                if not session.csrf_matches(presented):
                    raise Refused(
                        "this form's CSRF token is missing or stale: reload the page and try again"
                    )
                with structlog.contextvars.bound_contextvars(principal=session.identity.principal):
                    return await handler(self, request, session)
            except errors.AgentWorksError as exc:
                if isinstance(exc, Refused):
                    log.warning("console.refused", path=request.url.path, reason=exc.message)
                return self.refusal(request, session, exc)

        return endpoint


def redirect(path: str) -> RedirectResponse:
    """See other: after a console action, the page that shows its outcome."""
    return RedirectResponse(path, status_code=303, headers=SECURITY_HEADERS)


def form_of(request: Request) -> dict[str, str]:
    """The form `Console.action` read."""
    form: dict[str, str] = request.state.form
    return form
