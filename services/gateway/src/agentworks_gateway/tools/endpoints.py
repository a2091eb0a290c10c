"""The `endpoints` tool (N2), HTTP API only: webhooks OUT. Register an endpoint for your
calls' ends and/or an inbox's new messages; list, get, rotate, delete; list an
endpoint's deliveries and redeliver one. (`webhooks` is the inbound kind, S5.)
"""

from __future__ import annotations

from typing import Any

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.core.limits import LIST_PAGE_DEFAULT, MAX_LIST_PAGE
from agentworks_gateway.tools.scheduling import AFTER_CURSOR, LIST_LIMIT, id_schema
from agentworks_gateway.tools.toolkit import Args, Tool, action_rule
from agentworks_gateway.webhooks_out.endpoints import (
    MAX_DESCRIPTION_CHARS,
    MAX_SOURCES,
    Endpoints,
)
from agentworks_gateway.webhooks_out.models import STATUSES, Delivery, Endpoint
from agentworks_gateway.webhooks_out.policy import MAX_URL_CHARS


def _time(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def endpoint_dict(endpoint: Endpoint, *, secret: bool = False) -> dict[str, Any]:
    """An endpoint as JSON; `secret` only right after register or rotate."""
    out: dict[str, Any] = {
        "endpoint_id": endpoint.endpoint_id,
        "url": endpoint.url,
        "events": [feed.source for feed in endpoint.feeds],
        "description": endpoint.description,
        "principal": endpoint.principal,
        "created_at": _time(endpoint.created_at),
        "secret_rotated_at": _time(endpoint.secret_rotated_at),
        "feed_errors": {f.source: f.last_error for f in endpoint.feeds if f.last_error},
    }
    if secret:
        out["secret"] = endpoint.secret
    return out


def delivery_dict(delivery: Delivery) -> dict[str, Any]:
    """A delivery and where it stands (pending, failing, delivered, gave_up)."""
    retrying = delivery.status in ("pending", "failing")
    return {
        "delivery_id": delivery.delivery_id,
        "endpoint_id": delivery.endpoint_id,
        "type": delivery.event_type,
        "event_key": delivery.event_key,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "created_at": _time(delivery.created_at),
        "last_attempt_at": _time(delivery.last_attempt_at),
        "last_status": delivery.last_status,
        "last_error": delivery.last_error or None,
        "next_attempt_at": _time(delivery.next_attempt_at) if retrying else None,
        "give_up_at": _time(delivery.give_up_at),
        "delivered_at": _time(delivery.delivered_at),
    }


def _endpoints(gateway: Any) -> Endpoints:
    webhooks_out = getattr(gateway, "webhooks_out", None)
    if webhooks_out is None:
        raise errors.Unavailable(
            "webhooks out are not running in this gateway process",
            reason=errors.Reason.NOT_CONFIGURED,
        )
    endpoints: Endpoints = webhooks_out.endpoints
    return endpoints


async def endpoints(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`endpoints`: register, list, get, rotate, delete, deliveries, redeliver (N2)."""
    use = _endpoints(gateway)
    action = args["action"]
    limit = args.get("limit") or LIST_PAGE_DEFAULT
    if action == "register":
        endpoint = await use.register(
            identity,
            url=args["url"],
            events=args["events"],
            description=args.get("description", ""),
        )
        return endpoint_dict(endpoint, secret=True)
    if action == "list":
        rows, cursor = await use.list_endpoints(identity, after=args.get("after"), limit=limit)
        return {"endpoints": [endpoint_dict(e) for e in rows], "next_cursor": cursor}
    if action == "get":
        return endpoint_dict(await use.get(identity, args["endpoint_id"]))
    if action == "rotate":
        return endpoint_dict(await use.rotate(identity, args["endpoint_id"]), secret=True)
    if action == "delete":
        await use.delete(identity, args["endpoint_id"])
        return {"deleted": True, "endpoint_id": args["endpoint_id"]}
    if action == "deliveries":
        found, cursor = await use.deliveries(
            identity,
            args["endpoint_id"],
            status=args.get("status"),
            after=args.get("after"),
            limit=limit,
        )
        return {"deliveries": [delivery_dict(d) for d in found], "next_cursor": cursor}
    return delivery_dict(await use.redeliver(identity, args["delivery_id"]))


ENDPOINTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["register", "list", "get", "rotate", "delete", "deliveries", "redeliver"],
            "description": "register: an endpoint AgentWorks posts signed events to (Standard "
            "Webhooks); its secret is returned this once. list, get (never the secret). "
            "rotate: a new secret, returned once, used from the next attempt on. delete. "
            "deliveries: an endpoint's deliveries newest first with their status. redeliver: "
            "send a delivery again now, under its id.",
        },
        "url": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_URL_CHARS,
            "description": "register (required): the https:// URL to post to (http:// only to "
            "addresses the operator allowed); loopback, private and link-local addresses "
            "are refused unless the operator allowed them.",
        },
        "events": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 200},
            "minItems": 1,
            "maxItems": MAX_SOURCES,
            "description": 'register (required): "call_ends" (the ends of your calls: '
            'call.ended) and/or "inbox:<inbox_id>" (new messages of an inbox of yours: '
            "message.created).",
        },
        "description": {
            "type": "string",
            "maxLength": MAX_DESCRIPTION_CHARS,
            "description": "register: a label.",
        },
        "endpoint_id": id_schema("endpoint id", "get, rotate, delete, deliveries"),
        "delivery_id": id_schema("delivery id (its webhook-id)", "redeliver"),
        "status": {
            "type": "string",
            "enum": list(STATUSES),
            "description": "deliveries: only those with this status.",
        },
        "after": AFTER_CURSOR,
        "limit": {**LIST_LIMIT, "maximum": MAX_LIST_PAGE},
    },
    "required": ["action"],
    "additionalProperties": False,
}

ENDPOINTS_ACTIONS = (
    action_rule("register", ("url", "events", "description"), required=("url", "events")),
    action_rule("list", ("after", "limit")),
    *(
        action_rule(a, ("endpoint_id",), required=("endpoint_id",))
        for a in ("get", "rotate", "delete")
    ),
    action_rule(
        "deliveries", ("endpoint_id", "status", "after", "limit"), required=("endpoint_id",)
    ),
    action_rule("redeliver", ("delivery_id",), required=("delivery_id",)),
)

ENDPOINTS_TOOL = Tool(
    "endpoints",
    "Webhooks out (HTTP API only): register an endpoint for your calls' ends and/or an "
    "inbox's new messages, signed per Standard Webhooks; list, get, rotate, delete; list "
    "an endpoint's deliveries and redeliver one.",
    ENDPOINTS_SCHEMA,
    endpoints,
    mcp=False,
    actions=ENDPOINTS_ACTIONS,
)
