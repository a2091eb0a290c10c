"""`agentworks endpoints ...`: webhooks OUT (N2) — endpoints AgentWorks posts your calls'
ends and your inboxes' new messages to, signed per Standard Webhooks, and their
deliveries (docs/webhooks-out.md). Calls the gateway's `endpoints` tool."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.output import note, print_fields, print_json, print_table, short_time
from agentworks_cli.scheduler import next_page, set_fields

STATUSES = ("pending", "failing", "delivered", "gave_up")


def _print_endpoint(e: Mapping[str, Any]) -> None:
    pairs = [("endpoint_id", e["endpoint_id"]), ("url", e["url"])]
    if "secret" in e:
        pairs.append(("secret", e["secret"]))
    pairs += [
        ("events", ", ".join(e["events"])),
        ("description", e["description"] or None),
        ("principal", e["principal"]),
        ("created_at", e["created_at"]),
        ("secret_rotated_at", e["secret_rotated_at"]),
    ]
    pairs += [(f"feed_error ({source})", text) for source, text in e["feed_errors"].items()]
    print_fields(pairs)
    if "secret" in e:
        note(
            "store the secret now: it is not shown again. Verify each delivery with it, "
            "e.g. standardwebhooks.Webhook(secret).verify(body, headers) (docs/webhooks-out.md)"
        )


def _print_delivery(d: Mapping[str, Any]) -> None:
    print_fields(
        [
            ("delivery_id", d["delivery_id"]),
            ("type", d["type"]),
            ("status", d["status"]),
            ("attempts", d["attempts"]),
            ("next_attempt_at", d["next_attempt_at"]),
            ("give_up_at", d["give_up_at"]),
        ]
    )


async def endpoints(api: ApiClient, args: argparse.Namespace) -> None:
    action = args.action
    request: dict[str, Any] = {"action": action}
    if action == "register":
        request["url"] = args.endpoint_url
        request["events"] = args.events
        set_fields(request, args, description="description")
    elif action in ("list", "deliveries"):
        set_fields(request, args, after="after", limit="limit")
        if action == "deliveries":
            request["endpoint_id"] = args.endpoint_id
            set_fields(request, args, status="status")
    elif action == "redeliver":
        request["delivery_id"] = args.delivery_id
    else:
        request["endpoint_id"] = args.endpoint_id
    result = await api.call("endpoints", request)
    if args.json:
        print_json(result)
    elif action == "list":
        print_table(
            ("ID", "URL", "EVENTS", "DESCRIPTION", "CREATED"),
            (
                (
                    e["endpoint_id"],
                    e["url"],
                    ", ".join(e["events"]),
                    e["description"],
                    short_time(e["created_at"]),
                )
                for e in result["endpoints"]
            ),
            "no endpoints",
            keep=(0, 4),
        )
        next_page(result, "endpoints", args)
    elif action == "deliveries":
        print_table(
            ("ID", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "NEXT ATTEMPT", "LAST ERROR"),
            (
                (
                    d["delivery_id"],
                    d["type"],
                    d["status"],
                    d["attempts"],
                    short_time(d["created_at"]),
                    short_time(d["next_attempt_at"]) if d["next_attempt_at"] else "",
                    d["last_error"] or "",
                )
                for d in result["deliveries"]
            ),
            "no deliveries",
            keep=(0, 2, 4),
        )
        next_page(result, "deliveries", args)
    elif action == "delete":
        print(f"deleted endpoint {args.endpoint_id}", flush=True)
    elif action == "redeliver":
        _print_delivery(result)
    else:
        _print_endpoint(result)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `endpoints` to the `agentworks` parser."""
    parser = commands.add_parser(
        "endpoints", help="webhooks out: endpoints your calls' ends and inbox messages go to"
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
    register = actions.add_parser(
        "register",
        parents=[common],
        help="register an endpoint; prints its id and secret (shown once)",
        description="Register an HTTPS endpoint that AgentWorks posts events to, signed as "
        "Standard Webhooks says (webhook-id, webhook-timestamp, webhook-signature) and "
        "retried for 24 hours. Loopback, private and link-local addresses are refused "
        "unless the operator allowed them (GATEWAY_WEBHOOKS_ALLOW).",
    )
    register.add_argument("endpoint_url", metavar="URL", help="the https:// URL to post to")
    register.add_argument(
        "--events",
        action="append",
        required=True,
        metavar="SOURCE",
        help="call_ends (the ends of your calls) or inbox:<inbox_id> (new messages of an "
        "inbox of yours); repeat for several",
    )
    register.add_argument("--description", help="a label")
    register.set_defaults(run=endpoints, action="register")
    listing = actions.add_parser("list", parents=[common], help="list your endpoints")
    listing.add_argument("--after", metavar="CURSOR", help="the next page: the cursor printed last")
    listing.add_argument("--limit", type=int, metavar="N", help="at most N (1-200)")
    listing.set_defaults(run=endpoints, action="list")
    for action, text in (
        ("get", "show an endpoint (not its secret)"),
        ("rotate", "give an endpoint a new secret (shown once), used from the next attempt"),
        ("delete", "delete an endpoint and its deliveries"),
    ):
        one = actions.add_parser(action, parents=[common], help=text)
        one.add_argument("endpoint_id", metavar="ID", help="the endpoint id (ep_...)")
        one.set_defaults(run=endpoints, action=action)
    deliveries = actions.add_parser(
        "deliveries",
        parents=[common],
        help="an endpoint's deliveries, newest first, with their status",
    )
    deliveries.add_argument("endpoint_id", metavar="ID", help="the endpoint id (ep_...)")
    deliveries.add_argument("--status", choices=STATUSES, help="only deliveries with this status")
    deliveries.add_argument(
        "--after", metavar="CURSOR", help="the next page: the cursor printed last"
    )
    deliveries.add_argument("--limit", type=int, metavar="N", help="at most N (1-200)")
    deliveries.set_defaults(run=endpoints, action="deliveries")
    redeliver = actions.add_parser(
        "redeliver", parents=[common], help="send a delivery again now, under its id"
    )
    redeliver.add_argument("delivery_id", metavar="ID", help="the delivery id (msg_...)")
    redeliver.set_defaults(run=endpoints, action="redeliver")
