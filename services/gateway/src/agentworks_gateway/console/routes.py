"""The console's routes (V3, V4): `/` leads to `/console/`; sign-in, sign-out, and the
pages of `conversations`, `calls`, `timers` and `endpoints`.

Sign-in turns an API token into a session cookie: HttpOnly (no script reads it),
SameSite=Strict (no other site's page, link or form sends it), Secure when served over
HTTPS, and `Path=/`. Strict rather than Lax: a link to the console from elsewhere opens
the sign-in page instead of a signed-in page, which costs a console for operators little
and keeps every cross-site request cookieless, not only the state-changing ones.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from agentworks.core import errors
from agentworks_gateway.console import calls, conversations, endpoints, live, timers
from agentworks_gateway.console.web import (
    PREFIX,
    SECURITY_HEADERS,
    SESSION_COOKIE,
    STATIC,
    Console,
    redirect,
)
from agentworks_gateway.service import Gateway
from agentworks_gateway.sessions import Session


def _next_page(value: str) -> str:
    """Where to go after sign-in: a console path only (never another site)."""
    if value.startswith(PREFIX + "/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{PREFIX}/"


async def sign_in_form(console: Console, request: Request) -> Response:
    """The sign-in form; `?next=` is where signing in leads (the home by default), and
    a session that is already signed in goes there at once (V7)."""
    target = _next_page(request.query_params.get("next", ""))
    try:
        console.check_host(request)
        await console.sessions.resume(request.cookies.get(SESSION_COOKIE))
    except errors.AgentWorksError:
        return console.render(request, "sign_in.html", None, error="", next=target)
    return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)


async def sign_in(console: Console, request: Request) -> Response:
    """POST sign-in: the token from the form becomes a session cookie, and the browser
    goes on to the page it asked for (`next`), or the home."""
    form: dict[str, str] = {}
    try:
        console.check_host(request)
        console.check_origin(request)  # no login CSRF: only the console's own form signs in
        form = await console.form(request)
        session_id, session = await console.sessions.sign_in(form.get("token", ""))
    except errors.AgentWorksError as exc:
        status = 401 if exc.code.name == "UNAUTHENTICATED" else 403
        return console.render(
            request,
            "sign_in.html",
            None,
            status=status,
            error=exc.message,
            next=_next_page(form.get("next", "")),
        )
    response = RedirectResponse(
        _next_page(form.get("next", "")), status_code=303, headers=SECURITY_HEADERS
    )
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=max(1, int((session.expires_at - datetime.now(UTC)).total_seconds())),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


async def sign_out(console: Console, request: Request, session: Session) -> Response:
    await console.sessions.sign_out(request.cookies.get(SESSION_COOKIE))
    response = redirect(f"{PREFIX}/sign-in")
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def home(console: Console, request: Request, session: Session) -> Response:
    return redirect(f"{PREFIX}/conversations")


def console_routes(gateway: Gateway) -> list[BaseRoute]:
    """The console's routes on the gateway's HTTP port."""
    console = Console(gateway)

    async def root(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=307)

    async def favicon(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/static/favicon.svg", status_code=301)

    async def sign_in_get(request: Request) -> Response:
        return await sign_in_form(console, request)

    async def sign_in_post(request: Request) -> Response:
        return await sign_in(console, request)

    page, action = console.page, console.action
    return [
        Route("/", root, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Route(f"{PREFIX}", root, methods=["GET"]),
        Route(f"{PREFIX}/", page(home), methods=["GET"]),
        Route(f"{PREFIX}/sign-in", sign_in_get, methods=["GET"]),
        Route(f"{PREFIX}/sign-in", sign_in_post, methods=["POST"]),
        Route(f"{PREFIX}/sign-out", action(sign_out), methods=["POST"]),
        *conversations.routes(page, action),
        *calls.routes(page, action),
        *timers.routes(page, action),
        *endpoints.routes(page, action),
        *live.routes(page),
        Mount(f"{PREFIX}/static", StaticFiles(directory=STATIC), name="console-static"),
    ]
