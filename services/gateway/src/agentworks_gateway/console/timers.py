"""Timers in the console (V4, S1-S5): schedules (pause and resume one), wake-ups,
webhooks, and the pauses in force, which the operator sets and lifts.

Through the `list`, `schedules` and `pauses` tools as the signed-in identity: the
scheduler decides who sees and changes what.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks.core import errors
from agentworks_gateway.console.web import PREFIX, Console, form_of, redirect
from agentworks_gateway.sessions import Session

PAGE = 100


async def timers_page(console: Console, request: Request, session: Session) -> Response:
    schedules = await console.tool(session, "list", {"what": "schedules", "limit": PAGE})
    wake_ups = await console.tool(session, "list", {"what": "wake_ups", "limit": PAGE})
    webhooks = await console.tool(session, "list", {"what": "webhooks", "limit": PAGE})
    pauses = await console.tool(session, "pauses", {"action": "status"})
    return console.render(
        request,
        "timers.html",
        session,
        schedules=schedules["items"],
        wake_ups=wake_ups["items"],
        webhooks=webhooks["items"],
        pauses=pauses,
    )


async def schedule_action(console: Console, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    if action not in ("pause", "resume"):
        raise errors.NotFound(
            f"no schedule action {action!r}: pause or resume",
            reason=errors.Reason.NOT_FOUND,
            metadata=errors.kind_meta("action", action),
        )
    await console.tool(
        session,
        "schedules",
        {"action": action, "schedule_id": request.path_params["schedule_id"]},
    )
    return redirect(f"{PREFIX}/timers")


async def pause_action(console: Console, request: Request, session: Session) -> Response:
    action = request.path_params["action"]
    if action not in ("pause", "resume"):
        raise errors.NotFound(
            f"no pause action {action!r}: pause or resume",
            reason=errors.Reason.NOT_FOUND,
            metadata=errors.kind_meta("action", action),
        )
    form = form_of(request)
    args: dict[str, Any] = {"action": action}
    if form.get("product", "").strip():
        args["product"] = form["product"].strip()
    if action == "pause" and form.get("reason", "").strip():
        args["reason"] = form["reason"].strip()
    await console.tool(session, "pauses", args)
    return redirect(f"{PREFIX}/timers")


def routes(page: Any, action: Any) -> list[Route]:
    return [
        Route(f"{PREFIX}/timers", page(timers_page), methods=["GET"]),
        Route(
            f"{PREFIX}/schedules/{{schedule_id}}/{{action}}",
            action(schedule_action),
            methods=["POST"],
        ),
        Route(f"{PREFIX}/pauses/{{action}}", action(pause_action), methods=["POST"]),
    ]
