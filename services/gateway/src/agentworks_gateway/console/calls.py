"""Calls and targets in the console (V4): the calls list, a call's live status (progress,
messages, events, files, its question), answering and cancelling it, reading and
downloading its files; targets with their functions, schemas and running slots, and
calling a function.

Everything goes through the `list` and `functions` tools as the signed-in identity. An
open call's panel is redrawn by push at each change (`live`, N4).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentworks.core import errors
from agentworks.core.limits import MAX_EVENT_PAGE, MAX_MESSAGE_PAGE, MAX_READ_BYTES
from agentworks_gateway.console.web import PREFIX, SECURITY_HEADERS, Console, form_of, redirect
from agentworks_gateway.sessions import Session

PAGE = 50
OPEN = ("running", "waiting_for_input")
STATUSES = (
    "open",
    "running",
    "waiting_for_input",
    "completed",
    "failed",
    "interrupted",
    "cancelled",
)
# A text file is shown up to this many bytes; download it for the rest.
MAX_SHOWN_BYTES = 1024 * 1024
# A download is read in pages of MAX_READ_BYTES, up to this many bytes.
MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024


async def calls_page(console: Console, request: Request, session: Session) -> Response:
    query = request.query_params
    args: dict[str, Any] = {"what": "calls", "limit": PAGE}
    for name in ("cursor", "target", "status", "caller"):
        if query.get(name):
            args[name] = query[name]
    page = await console.tool(session, "list", args)
    filters = {name: query.get(name, "") for name in ("target", "status", "caller")}
    return console.render(
        request,
        "calls.html",
        session,
        calls=page["items"],
        next_cursor=page.get("next_cursor", ""),
        first_page=bool(query.get("cursor")),
        filter_query=urllib.parse.urlencode({k: v for k, v in filters.items() if v}),
        statuses=STATUSES,
        filters=filters,
    )


async def status_of(console: Console, session: Session, call_id: str) -> dict[str, Any]:
    args: dict[str, Any] = {
        "action": "status",
        "call_id": call_id,
        "message_limit": MAX_MESSAGE_PAGE,
        "event_limit": MAX_EVENT_PAGE,
    }
    return await console.tool(session, "functions", args)


async def call_page(console: Console, request: Request, session: Session) -> Response:
    status = await status_of(console, session, request.path_params["call_id"])
    return console.render(request, "call.html", session, call=status, open=OPEN)


async def call_reply(console: Console, request: Request, session: Session) -> Response:
    call_id = request.path_params["call_id"]
    text = form_of(request).get("text", "")
    await console.tool(session, "functions", {"action": "reply", "call_id": call_id, "text": text})
    return redirect(f"{PREFIX}/calls/{call_id}")


async def call_cancel(console: Console, request: Request, session: Session) -> Response:
    call_id = request.path_params["call_id"]
    await console.tool(session, "functions", {"action": "cancel", "call_id": call_id})
    return redirect(f"{PREFIX}/calls/{call_id}")


async def _file_bytes(
    console: Console, session: Session, call_id: str, name: str, limit: int
) -> tuple[bytes, bool, dict[str, Any]]:
    """Up to `limit` bytes of a file; whether there is more; its first page's record."""
    data = bytearray()
    offset, first = 0, None
    while True:
        page = await console.tool(
            session,
            "functions",
            {
                "action": "read",
                "call_id": call_id,
                "file": name,
                "offset": offset,
                "limit": MAX_READ_BYTES,
            },
        )
        first = first or page
        if "content_base64" in page:
            data += base64.b64decode(page["content_base64"])
        else:
            data += page["content"].encode()
        if page.get("next_offset") is None:
            return bytes(data), False, first
        offset = page["next_offset"]
        if len(data) >= limit:
            return bytes(data[:limit]), True, first


async def call_file(console: Console, request: Request, session: Session) -> Response:
    """A file of a call: shown as text, or (`?download=1`, or binary) downloaded."""
    call_id, name = request.path_params["call_id"], request.path_params["name"]
    download = request.query_params.get("download") == "1"
    limit = MAX_DOWNLOAD_BYTES if download else MAX_SHOWN_BYTES
    data, more, first = await _file_bytes(console, session, call_id, name, limit)
    if download:
        if more:
            raise errors.InvalidArgument(
                f"{name} is larger than {MAX_DOWNLOAD_BYTES} bytes, what the console downloads; "
                "read it with `agentworks crews call-file` in pages",
                reason=errors.Reason.REQUEST_LIMIT,
                metadata={"limit": str(MAX_DOWNLOAD_BYTES)},
            )
        filename = urllib.parse.quote(name.rsplit("/", 1)[-1])
        return Response(
            data,
            media_type="application/octet-stream",
            headers={
                **SECURITY_HEADERS,
                "Content-Disposition": f"attachment; filename*=UTF-8''{filename}",
            },
        )
    text = None if "content_base64" in first else data.decode("utf-8", errors="replace")
    return console.render(
        request,
        "file.html",
        session,
        call_id=call_id,
        name=name,
        text=text,
        more=more,
        size=first.get("size"),
        media_type=first.get("media_type"),
    )


async def targets_page(console: Console, request: Request, session: Session) -> Response:
    args: dict[str, Any] = {"what": "targets", "limit": PAGE}
    if request.query_params.get("cursor"):
        args["cursor"] = request.query_params["cursor"]
    page = await console.tool(session, "list", args)
    # The messaging switch (C1, C8) of the targets the caller owns, which they may change.
    owned = [t for t in page["items"] if t["owner"] == session.identity.principal]
    switches = {
        t["target"]: (
            await console.tool(session, "targets", {"action": "get", "target": t["target"]})
        )["capabilities"]["free_text_ask"]
        for t in owned
    }
    return console.render(
        request,
        "targets.html",
        session,
        targets=page["items"],
        next_cursor=page.get("next_cursor", ""),
        switches=switches,
    )


async def set_messaging(console: Console, request: Request, session: Session) -> Response:
    """Turn a target's agent messaging on or off (`targets action=update`, C8)."""
    form = form_of(request)
    if form.get("free_text_ask") not in ("on", "off"):
        raise errors.InvalidArgument(
            "agent messaging is set on or off",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("messaging", "enum"),
        )
    await console.tool(
        session,
        "targets",
        {
            "action": "update",
            "target": form.get("target", ""),
            "free_text_ask": form["free_text_ask"] == "on",
        },
    )
    return redirect(f"{PREFIX}/targets")


async def call_function(console: Console, request: Request, session: Session) -> Response:
    form = form_of(request)
    target = form.get("target", "")
    kind, _, name = target.partition(":")
    if kind not in ("crew", "workflow") or not name:
        raise errors.InvalidArgument(
            f"target {target!r}: write crew:<name> or workflow:<id>",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("target", "pattern"),
        )
    try:
        inputs = json.loads(form.get("inputs", "") or "{}")
    except ValueError as exc:
        raise errors.InvalidArgument(
            f'the inputs are not JSON ({exc}): write a JSON object, e.g. {{"text": "hi"}}',
            reason=errors.Reason.MALFORMED,
            metadata=errors.rule_meta("inputs"),
        ) from None
    args: dict[str, Any] = {
        "action": "call",
        "crew" if kind == "crew" else "workflow_id": name,
        "function": form.get("function", ""),
        "inputs": inputs,
    }
    receipt = await console.tool(session, "functions", args)
    return redirect(f"{PREFIX}/calls/{receipt['call_id']}")


def routes(page: Any, action: Any) -> list[Route]:
    base = f"{PREFIX}/calls"
    return [
        Route(base, page(calls_page), methods=["GET"]),
        Route(base + "/{call_id}", page(call_page), methods=["GET"]),
        Route(base + "/{call_id}/reply", action(call_reply), methods=["POST"]),
        Route(base + "/{call_id}/cancel", action(call_cancel), methods=["POST"]),
        Route(base + "/{call_id}/files/{name:path}", page(call_file), methods=["GET"]),
        Route(f"{PREFIX}/targets", page(targets_page), methods=["GET"]),
        Route(f"{PREFIX}/targets/call", action(call_function), methods=["POST"]),
        Route(f"{PREFIX}/targets/messaging", action(set_messaging), methods=["POST"]),
    ]
