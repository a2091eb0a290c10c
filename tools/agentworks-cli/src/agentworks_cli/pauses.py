"""`agentworks pauses pause|resume|status`: hold and release timers, for operators (S3, G3)."""

from __future__ import annotations

import argparse
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.output import note, print_json, print_table, short_time
from agentworks_cli.scheduler import set_fields


async def pauses(api: ApiClient, args: argparse.Namespace) -> None:
    request = set_fields({"action": args.action}, args, product="product", reason="reason")
    state = await api.call("pauses", request)
    if args.json:
        print_json(state)
        return
    if state.get("note"):  # a resume that lifted nothing: say so before the table
        note(state["note"])
    print_table(
        ("SCOPE", "REASON", "PAUSED_BY", "PAUSED_AT"),
        (
            (p["product"] or "(global)", p["reason"], p["paused_by"], short_time(p["paused_at"]))
            for p in state["pauses"]
        ),
        "no pauses: timers fire",
        keep=(0, 3),
    )


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `pauses` to the `agentworks` parser."""
    pause = commands.add_parser("pauses", help="hold and release timers (operator)")
    pause_cmds = pause.add_subparsers(title="actions", metavar="ACTION", required=True)
    product_help = "crew:<name>, workflow:<id>, crew:* or workflow:*; omit for the global pause"
    hold = pause_cmds.add_parser(
        "pause", parents=[common], help="hold timers, globally or for --product"
    )
    hold.add_argument("--product", metavar="PRODUCT", help=product_help)
    hold.add_argument("--reason", help="why (shown by pauses status)")
    hold.set_defaults(run=pauses, action="pause")
    release = pause_cmds.add_parser(
        "resume", parents=[common], help="lift a pause; held timers fire on the next tick"
    )
    release.add_argument("--product", metavar="PRODUCT", help=product_help)
    release.set_defaults(run=pauses, action="resume")
    state = pause_cmds.add_parser("status", parents=[common], help="show the pauses in force")
    state.set_defaults(run=pauses, action="status")
