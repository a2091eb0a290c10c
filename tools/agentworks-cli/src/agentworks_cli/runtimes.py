"""`agentworks runtimes list` and `runtimes credentials create|list|revoke`: runtimes and
their credentials (T2, V1), for a target's owner or an operator."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.listing import fetch, more, paging_options
from agentworks_cli.output import note, print_fields, print_json, print_table, short_time

TOOL = "runtime_credentials"


def _print_credential(result: Mapping[str, Any]) -> None:
    pairs = [("credential_id", result["credential_id"])]
    if "credential" in result:
        pairs.append(("credential", result["credential"]))
    pairs += [
        ("principal", result["principal"]),
        ("targets", result["targets"]),
        ("label", result["label"] or "-"),
        ("created_by", result["created_by"]),
        ("created_at", result["created_at"]),
        ("expires_at", result["expires_at"]),
        ("revoked_at", result["revoked_at"]),
    ]
    print_fields(pairs)


async def credentials(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "create":
        call: dict[str, Any] = {"action": "create", "principal": args.principal}
        if args.target:
            call["targets"] = args.target
        if args.label:
            call["label"] = args.label
        if args.expires_in_seconds is not None:
            call["expires_in_seconds"] = args.expires_in_seconds
        result = await api.call(TOOL, call)
        if args.json:
            print_json(result)
        else:
            _print_credential(result)
            note(
                "store the credential now: it is not shown again; give it to the runtime as "
                "AGENTWORKS_RUNTIME_CREDENTIAL (or a file named by "
                "AGENTWORKS_RUNTIME_CREDENTIAL_FILE)"
            )
    elif args.action == "list":
        result = await api.call(TOOL, {"action": "list", "include_revoked": args.all})
        if args.json:
            print_json(result)
            return
        print_table(
            ("ID", "PRINCIPAL", "TARGETS", "LABEL", "CREATED", "EXPIRES", "REVOKED"),
            (
                (
                    c["credential_id"],
                    c["principal"],
                    ",".join(c["targets"]),
                    c["label"],
                    short_time(c["created_at"]),
                    short_time(c["expires_at"]),
                    short_time(c["revoked_at"]),
                )
                for c in result["runtime_credentials"]
            ),
            "no runtime credentials",
            keep=(0, 4, 5, 6),  # ids and times stay whole
        )
    else:
        result = await api.call(TOOL, {"action": "revoke", "credential_id": args.credential_id})
        if args.json:
            print_json(result)
        else:
            print(
                f"revoked {result['credential_id']} ({result['principal']}) at "
                f"{result['revoked_at']}"
            )


async def list_runtimes(api: ApiClient, args: argparse.Namespace) -> None:
    page = await fetch(api, args, "runtimes", include_revoked=args.include_revoked)
    if args.json:
        print_json(page)
        return
    print_table(
        ("PRINCIPAL", "TARGETS", "CREDENTIAL", "LAST SEEN", "LABEL", "CREATED", "REVOKED"),
        (
            (
                c["principal"],
                ",".join(c["targets"]),
                c["credential_id"],
                short_time(c["last_seen_at"]) if c["last_seen_at"] else "never",
                c["label"],
                short_time(c["created_at"]),
                short_time(c["revoked_at"]),
            )
            for c in page["items"]
        ),
        "no runtimes",
        keep=(0, 2, 3, 5, 6),
    )
    more(page)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `runtimes credentials` to the `agentworks` parser."""
    runtimes_cmd = commands.add_parser(
        "runtimes", help="runtimes and their credentials (a target's owner or an operator)"
    )
    runtimes_cmds = runtimes_cmd.add_subparsers(title="areas", metavar="AREA", required=True)
    listing = runtimes_cmds.add_parser(
        "list",
        parents=[common],
        help="list runtimes: their credentials and when each was last seen",
        description="List the runtimes of your targets (the operator: all) by their "
        "credentials, oldest first, with when each last exchanged its credential for an "
        "identity (never: not yet).",
    )
    listing.add_argument("--include-revoked", action="store_true", help="also revoked credentials")
    paging_options(listing, "runtimes")
    listing.set_defaults(run=list_runtimes)
    creds = runtimes_cmds.add_parser(
        "credentials", help="create, list or revoke the credentials runtimes authenticate with"
    )
    actions = creds.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = actions.add_parser(
        "create", parents=[common], help="create a runtime credential; the secret is printed once"
    )
    create.add_argument(
        "--principal",
        required=True,
        help="who the runtime acts as: agent:<crew>/<agent> or workflow:<id>",
    )
    create.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="crew:x",
        help="a target it serves (repeatable; default and only choice: the principal's own)",
    )
    create.add_argument("--label", help="which runtime holds it")
    create.add_argument(
        "--expires-in-seconds",
        type=int,
        metavar="N",
        help="the credential stops working N seconds from now (default: never)",
    )
    create.set_defaults(run=credentials, action="create")
    listing = actions.add_parser(
        "list", parents=[common], help="list your targets' credentials (never their secrets)"
    )
    listing.add_argument("--all", action="store_true", help="include revoked credentials")
    listing.set_defaults(run=credentials, action="list")
    revoke = actions.add_parser(
        "revoke", parents=[common], help="revoke a credential; its next exchange is refused"
    )
    revoke.add_argument("credential_id", metavar="ID", help="the credential id (cred_...)")
    revoke.set_defaults(run=credentials, action="revoke")
