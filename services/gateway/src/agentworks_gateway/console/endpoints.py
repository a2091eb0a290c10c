"""Webhooks out in the console (N2): the signed-in principal's endpoints, each with its
latest deliveries and their status, and a Redeliver button per delivery.

Through the `endpoints` tool as the signed-in identity, so a principal sees and
redelivers only its own (A3).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks_gateway.console.web import PREFIX, Console, redirect
from agentworks_gateway.sessions import Session

PAGE = 50
DELIVERIES = 20


async def endpoints_page(console: Console, request: Request, session: Session) -> Response:
    listed = await console.tool(session, "endpoints", {"action": "list", "limit": PAGE})
    endpoints: list[dict[str, Any]] = []
    for endpoint in listed["endpoints"]:
        found = await console.tool(
            session,
            "endpoints",
            {"action": "deliveries", "endpoint_id": endpoint["endpoint_id"], "limit": DELIVERIES},
        )
        endpoints.append({**endpoint, "deliveries": found["deliveries"]})
    return console.render(request, "endpoints.html", session, endpoints=endpoints)


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
        Route(
            f"{PREFIX}/deliveries/{{delivery_id}}/redeliver",
            action(redeliver),
            methods=["POST"],
        ),
    ]
