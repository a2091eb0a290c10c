"""`agentworks webhooks ...`: signed inbound webhooks into a conversation (S4, G3)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.output import note, print_fields, print_json, print_table, short_time
from agentworks_cli.scheduler import (
    list_options,
    list_request,
    next_page,
    set_fields,
    submission_option,
)


def _print_webhook(api: ApiClient, w: Mapping[str, Any], *, created: bool = False) -> None:
    pairs = [("webhook_id", w["webhook_id"]), ("url", api.url + w["path"])]
    if "secret" in w:
        pairs.append(("secret", w["secret"]))
    pairs += [
        ("secret_fingerprint", w["secret_fingerprint"]),
        ("name", w["name"] or None),
        ("conversation_id", w["conversation_id"]),
        ("product", w["product"] or None),
        ("created_by", w["created_by"]),
        ("created_at", w["created_at"]),
        ("secret_rotated_at", w["secret_rotated_at"]),
    ]
    print_fields(pairs)
    if "secret" in w:
        note(
            "store the secret now: it is not shown again. Sign each POST with "
            "X-AgentWorks-Timestamp, X-AgentWorks-Signature and X-AgentWorks-Delivery "
            "(docs/scheduler.md, Signing recipe)"
        )
    elif created:
        note(
            "this --submission-id created this webhook earlier; its secret is given again "
            "only within 24 hours of the create and until a rotate: run `agentworks webhooks "
            f"rotate {w['webhook_id']}` for a new one"
        )


async def webhooks(api: ApiClient, args: argparse.Namespace) -> None:
    action = args.action
    if action == "list":
        result = await api.call("webhooks", list_request("list", args))
        if args.json:
            print_json(result)
            return
        print_table(
            ("ID", "NAME", "CONVERSATION", "PRODUCT", "FINGERPRINT", "CREATED"),
            (
                (
                    w["webhook_id"],
                    w["name"],
                    w["conversation_id"],
                    w["product"],
                    w["secret_fingerprint"],
                    short_time(w["created_at"]),
                )
                for w in result["webhooks"]
            ),
            "no webhooks",
            keep=(0, 2, 5),
        )
        next_page(result, "webhooks", args)
        return
    request: dict[str, Any] = {"action": action}
    if action == "create":
        set_fields(request, args, conversation_id="conversation", name="name", product="product")
        set_fields(request, args, submission_id="submission_id")
    else:
        request["webhook_id"] = args.webhook_id
    result = await api.call("webhooks", request)
    if args.json:
        print_json(result)
    elif action == "delete":
        print(f"deleted webhook {args.webhook_id}", flush=True)
    else:
        _print_webhook(api, result, created=action == "create")


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `webhooks` to the `agentworks` parser."""
    hooks = commands.add_parser("webhooks", help="signed webhooks into a conversation")
    hooks_cmds = hooks.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = hooks_cmds.add_parser(
        "create",
        parents=[common],
        help="create a webhook; prints its URL and secret (shown once)",
        description="Create a webhook into a conversation (operators, or the agents of the "
        "conversation's target). Outside systems POST events to the printed URL, signed "
        "with the secret; each body is delivered byte-for-byte into the conversation. "
        "Webhooks are inbound only: AgentWorks never calls out to a URL.",
    )
    create.add_argument("--conversation", required=True, metavar="ID", help="the conversation")
    create.add_argument("--name", help="a label, shown to the agents with each event")
    create.add_argument(
        "--product",
        metavar="PRODUCT",
        help="operators: the product it belongs to (default: the conversation's target)",
    )
    submission_option(create, "webhook (and its secret, within 24 hours, unless rotated)")
    create.set_defaults(run=webhooks, action="create")
    listing = hooks_cmds.add_parser(
        "list",
        parents=[common],
        help="list the webhooks you may see: yours and those on targets you own (no secrets)",
    )
    list_options(listing, "webhooks")
    listing.set_defaults(run=webhooks, action="list")
    for action, text in (
        ("get", "show a webhook (not its secret)"),
        ("rotate", "give a webhook a new secret (shown once); the old one stops at once"),
        ("delete", "delete a webhook"),
    ):
        one = hooks_cmds.add_parser(action, parents=[common], help=text)
        one.add_argument("webhook_id", metavar="ID", help="the webhook id")
        one.set_defaults(run=webhooks, action=action)
