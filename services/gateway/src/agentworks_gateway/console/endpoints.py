"""Webhooks out in the console (N2): the signed-in principal's endpoints, each with its
latest deliveries and their status, a Redeliver button per delivery and a Delete button
per endpoint, and a form that registers one (its secret shown once, on the page that
answers the form: it is never shown again).

Through the `endpoints` tool as the signed-in identity, so a principal sees, registers,
redelivers and deletes only its own (A3), under the tool's rules and refusals.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks.core import errors
from agentworks_gateway.api import HTTP_STATUS
from agentworks_gateway.console.web import PREFIX, Console, form_of, redirect
from agentworks_gateway.sessions import Session

PAGE = 50
DELIVERIES = 20


# The events the form offers: the ends of the caller's calls, an inbox's new messages.
CALL_ENDS = "call_ends"
INBOX = "inbox:"


async def endpoints_page(
    console: Console, request: Request, session: Session, **shown: Any
) -> Response:
    listed = await console.tool(session, "endpoints", {"action": "list", "limit": PAGE})
    endpoints: list[dict[str, Any]] = []
    for endpoint in listed["endpoints"]:
        found = await console.tool(
            session,
            "endpoints",
            {"action": "deliveries", "endpoint_id": endpoint["endpoint_id"], "limit": DELIVERIES},
        )
        endpoints.append({**endpoint, "deliveries": found["deliveries"]})
    return console.render(request, "endpoints.html", session, endpoints=endpoints, **shown)


async def register(console: Console, request: Request, session: Session) -> Response:
    """The form's endpoint registered; the page answers with its secret, this once."""
    form = form_of(request)
    events = [CALL_ENDS] if form.get("call_ends") else []
    if inbox_id := form.get("inbox_id", "").strip():
        events.append(INBOX + inbox_id)
    args: dict[str, Any] = {"action": "register", "url": form.get("url", "").strip()}
    args["events"] = events
    if description := form.get("description", "").strip():
        args["description"] = description
    try:
        made = await console.tool(session, "endpoints", args)
    except errors.AgentWorksError as exc:
        if exc.code.name == "UNAUTHENTICATED":
            raise
        # The page again, saying what was wrong, the form as it was filled in.
        page = await endpoints_page(console, request, session, refused=exc, form=form)
        page.status_code = HTTP_STATUS.get(exc.code.name, 500)
        return page
    return await endpoints_page(console, request, session, registered=made)


async def delete(console: Console, request: Request, session: Session) -> Response:
    await console.tool(
        session,
        "endpoints",
        {"action": "delete", "endpoint_id": request.path_params["endpoint_id"]},
    )
    return redirect(f"{PREFIX}/endpoints")


async def redeliver(console: Console, request: Request, session: Session) -> Response:
    await console.tool(
        session,
        "endpoints",
        {"action": "redeliver", "delivery_id": request.path_params["delivery_id"]},
    )
    return redirect(f"{PREFIX}/endpoints")


def routes(page: Any, action: Any) -> list[Route]:
    return [
        Route(f"{PREFIX}/endpoints", page(endpoints_page), methods=["GET"]),
        Route(f"{PREFIX}/endpoints", action(register), methods=["POST"]),
        Route(f"{PREFIX}/endpoints/{{endpoint_id}}/delete", action(delete), methods=["POST"]),
        Route(
            f"{PREFIX}/deliveries/{{delivery_id}}/redeliver",
            action(redeliver),
            methods=["POST"],
        ),
    ]
