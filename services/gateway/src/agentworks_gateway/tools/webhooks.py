"""The `webhooks` tool (S5), HTTP API only: create, list, get, rotate (a new secret), delete.

Events arrive at the gateway's `POST /webhooks/<webhook_id>` (`server.receive_webhook`).
"""

from __future__ import annotations

from typing import Any

from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_NAME_CHARS
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks_gateway.tools.scheduling import (
    AFTER_CURSOR,
    CONVERSATION,
    LIST_FIELDS,
    LIST_LIMIT,
    PRODUCT,
    id_schema,
    list_args,
    submission_id_schema,
)
from agentworks_gateway.tools.toolkit import Args, Tool, action_rule, timestamp

WEBHOOK_PATH = "/webhooks/{webhook_id}"


# ------------------------------------------------------------------------ translation


def webhook_dict(webhook: s.Webhook) -> dict[str, Any]:
    """A webhook (S5); `secret` only right after create or rotate, `path` on the gateway."""
    out: dict[str, Any] = {
        "webhook_id": webhook.webhook_id,
        "path": WEBHOOK_PATH.format(webhook_id=webhook.webhook_id),
        "conversation_id": webhook.conversation_id,
        "name": webhook.name,
        "product": webhook.product,
        "secret_fingerprint": webhook.secret_fingerprint,
        "created_by": webhook.created_by,
        "created_at": timestamp(webhook.created_at),
        "secret_rotated_at": timestamp(webhook.secret_rotated_at),
    }
    if webhook.secret:
        out["secret"] = webhook.secret
    return out


# ------------------------------------------------------------------------- handlers


async def webhooks(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`webhooks`: create, list, get, rotate (new secret), delete (S5)."""
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "create":
        webhook = await client.create_webhook(
            args["conversation_id"],
            name=args.get("name", ""),
            product=args.get("product", ""),
            submission_id=args.get("submission_id"),
        )
    elif action == "list":
        page = await client.list_webhooks(**list_args(args))
        return {
            "webhooks": [webhook_dict(w) for w in page.webhooks],
            "next_cursor": page.next_cursor,
        }
    elif action == "get":
        webhook = await client.get_webhook(args["webhook_id"])
    elif action == "rotate":
        webhook = await client.rotate_webhook_secret(args["webhook_id"])
    else:
        await client.delete_webhook(args["webhook_id"])
        return {"deleted": True, "webhook_id": args["webhook_id"]}
    return webhook_dict(webhook)


# -------------------------------------------------------------------------- schemas

WEBHOOKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "get", "rotate", "delete"],
            "description": "create: a webhook into a conversation (inbound only: outside "
            "systems post to it); its secret is returned this once (and to a retry with the "
            "same submission_id within 24 hours, unless rotated). list, get (never the "
            "secret). rotate: a new secret, returned once; the old one stops working at "
            "once. delete.",
        },
        "webhook_id": id_schema("webhook id", "get, rotate, delete"),
        "conversation_id": CONVERSATION,
        "name": {"type": "string", "maxLength": MAX_NAME_CHARS, "description": "create: a label."},
        "product": PRODUCT,
        "submission_id": submission_id_schema("webhook"),
        "after": AFTER_CURSOR,
        "limit": LIST_LIMIT,
    },
    "required": ["action"],
    "additionalProperties": False,
}

WEBHOOKS_ACTIONS = (
    action_rule(
        "create",
        ("conversation_id", "name", "product", "submission_id"),
        required=("conversation_id",),
    ),
    action_rule("list", LIST_FIELDS),
    *(
        action_rule(a, ("webhook_id",), required=("webhook_id",))
        for a in ("get", "rotate", "delete")
    ),
)

WEBHOOK_TOOL = Tool(
    "webhooks",
    "Create, list, get, rotate or delete signed webhooks into a conversation (HTTP API "
    "only). POST events to the gateway at path, signed with the secret.",
    WEBHOOKS_SCHEMA,
    webhooks,
    mcp=False,
    actions=WEBHOOKS_ACTIONS,
)
