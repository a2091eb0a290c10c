"""`agentworks tokens create|list|revoke`: API tokens, for operators (A1, G3)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.output import note, print_fields, print_json, print_table, short_time


def _print_token(result: Mapping[str, Any]) -> None:
    pairs = [("token_id", result["token_id"])]
    if "token" in result:
        pairs.append(("token", result["token"]))
    pairs += [
        ("principal", result["principal"]),
        ("roles", result["roles"]),
        ("label", result["label"] or "-"),
        ("created_at", result["created_at"]),
        ("expires_at", result.get("expires_at")),
        ("revoked_at", result["revoked_at"]),
    ]
    print_fields(pairs)


async def tokens(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "create":
        call: dict[str, Any] = {"action": "create", "principal": args.principal}
        if args.operator:
            call["roles"] = ["operator"]
        if args.label:
            call["label"] = args.label
        if args.expires_in_seconds is not None:
            call["expires_in_seconds"] = args.expires_in_seconds
        result = await api.call("tokens", call)
        if args.json:
            print_json(result)
        else:
            _print_token(result)
            note("store the token now: it is not shown again")
    elif args.action == "list":
        result = await api.call("tokens", {"action": "list", "include_revoked": args.all})
        if args.json:
            print_json(result)
            return
        print_table(
            ("ID", "PRINCIPAL", "ROLES", "LABEL", "CREATED", "REVOKED"),
            (
                (
                    t["token_id"],
                    t["principal"],
                    ",".join(t["roles"]),
                    t["label"],
                    short_time(t["created_at"]),
                    short_time(t["revoked_at"]),
                )
                for t in result["tokens"]
            ),
            "no tokens",
            keep=(0, 4, 5),  # ids and times stay whole
        )
    else:
        result = await api.call("tokens", {"action": "revoke", "token_id": args.token_id})
        if args.json:
            print_json(result)
        else:
            print(f"revoked {result['token_id']} ({result['principal']}) at {result['revoked_at']}")


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `tokens` to the `agentworks` parser."""
    tokens_cmd = commands.add_parser("tokens", help="manage API tokens (operator)")
    tokens_cmds = tokens_cmd.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = tokens_cmds.add_parser(
        "create", parents=[common], help="create a token; the secret is printed once"
    )
    create.add_argument(
        "--principal",
        required=True,
        help="who the token acts as: user:<name>, agent:<crew>/<agent> or workflow:<id>",
    )
    create.add_argument("--operator", action="store_true", help="give the token the operator role")
    create.add_argument("--label", help="what the token is for")
    create.add_argument(
        "--expires-in-seconds",
        type=int,
        metavar="N",
        help="the token stops working N seconds from now (default: never)",
    )
    create.set_defaults(run=tokens, action="create")
    listing = tokens_cmds.add_parser(
        "list", parents=[common], help="list tokens (never their secrets)"
    )
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    listing.set_defaults(run=tokens, action="list")
    revoke = tokens_cmds.add_parser(
        "revoke", parents=[common], help="revoke a token; effective immediately"
    )
    revoke.add_argument("token_id", metavar="ID", help="the token id (tok_...)")
    revoke.set_defaults(run=tokens, action="revoke")
