"""`agentworks functions declare|remove`: an owner's function declarations, through the
`declarations` tool (F1, F2, G3)."""

from __future__ import annotations

import argparse
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.errors import UsageError
from agentworks_cli.inputs import VARIABLE_TYPES, json_argument, parse_variable
from agentworks_cli.output import print_fields, print_json

_DECLARATION_KEYS = (
    "target",
    "name",
    "description",
    "input_schema",
    "output_schema",
    "allowed_callers",
    "starts_work",
    "workflow",
)


def declaration(args: argparse.Namespace) -> dict[str, Any]:
    """The `declarations` arguments from --file, overridden by flags."""
    spec: dict[str, Any] = {}
    if args.file:
        spec = json_argument(f"@{args.file}" if args.file != "-" else "-", "--file")
        if not isinstance(spec, dict):
            raise UsageError(f"--file {args.file} must hold a JSON object (the declaration)")
        unknown = sorted(set(spec) - set(_DECLARATION_KEYS))
        if unknown:
            raise UsageError(
                f"--file {args.file}: unknown keys {', '.join(unknown)}; a declaration has "
                + ", ".join(_DECLARATION_KEYS)
            )
        if spec.get("target", args.target) != args.target:
            raise UsageError(f"--file {args.file} declares for {spec['target']}, not {args.target}")
    spec["target"] = args.target
    for key in ("name", "description"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    for key in ("input_schema", "output_schema"):
        value = getattr(args, key)
        if value is not None:
            spec[key] = json_argument(value, "--" + key.replace("_", "-"))
    if args.allowed_caller:
        spec["allowed_callers"] = list(args.allowed_caller)
    if args.starts_work is not None:
        spec["starts_work"] = args.starts_work
    if args.route or args.allowed_group or args.variable:
        workflow = dict(spec.get("workflow") or {})
        if args.route:
            workflow["route"] = args.route
        if args.allowed_group:
            workflow["allowed_groups"] = list(args.allowed_group)
        if args.variable:
            workflow["variables"] = [parse_variable(v) for v in args.variable]
        spec["workflow"] = workflow
    for key, flag in (("name", "--name"), ("input_schema", "--input-schema")):
        if key not in spec:
            raise UsageError(f"functions declare needs {key}: give {flag} or put it in --file")
    return spec


async def declare(api: ApiClient, args: argparse.Namespace) -> None:
    function = await api.call("declarations", {"action": "declare", **declaration(args)})
    if args.json:
        print_json(function)
        return
    print_fields(
        [
            ("target", function["target"]),
            ("name", function["name"]),
            ("description", function["description"] or None),
            ("inputs", ", ".join(function["input_schema"].get("properties") or {})),
            ("output_schema", "yes" if function["output_schema"] else "no"),
            ("allowed_callers", function["allowed_callers"]),
            ("starts_work", function["starts_work"]),
            ("route", (function.get("workflow") or {}).get("route")),
            ("updated_at", function["updated_at"]),
        ]
    )


async def remove(api: ApiClient, args: argparse.Namespace) -> None:
    result = await api.call(
        "declarations", {"action": "remove", "target": args.target, "name": args.name}
    )
    if args.json:
        print_json(result)
    else:
        print(f"removed {args.name} from {args.target}; its calls stay readable", flush=True)


def add_actions(functions_cmds: Any, common: argparse.ArgumentParser) -> None:
    """Add `declare` and `remove` to the actions of `agentworks functions`."""
    declare_cmd = functions_cmds.add_parser(
        "declare",
        parents=[common],
        help="declare (or replace) a function of a target you own",
        description="Declare a function: from --file (a JSON object with name, description, "
        "input_schema, output_schema, allowed_callers, starts_work, workflow), from flags, "
        "or both (flags win). Schemas are JSON Schema 2020-12, given inline or as @FILE. "
        "Workflow functions need --route; --variable is NAME:TYPE, NAME:TYPE:required or "
        "NAME:TYPE=DEFAULT (TYPE: " + ", ".join(VARIABLE_TYPES) + ").",
    )
    declare_cmd.add_argument("target", metavar="TARGET", help="crew:<name> or workflow:<id>")
    declare_cmd.add_argument(
        "--file", metavar="PATH", help="the declaration as JSON (- reads stdin)"
    )
    declare_cmd.add_argument("--name", help="the function's name")
    declare_cmd.add_argument("--description", help="what it does, for callers")
    declare_cmd.add_argument(
        "--input-schema", metavar="JSON", help="JSON Schema of the inputs (an object schema)"
    )
    declare_cmd.add_argument(
        "--output-schema", metavar="JSON", help="JSON Schema of the result (FUNCTION_RESULT_FILE)"
    )
    declare_cmd.add_argument(
        "--allowed-caller",
        action="append",
        metavar="PRINCIPAL",
        help="who may call besides you (repeatable): user:alice, user:*, agent:<crew>/*, *",
    )
    declare_cmd.add_argument(
        "--starts-work",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the function only starts work and completes with its start receipt",
    )
    declare_cmd.add_argument("--route", help="workflow functions: the route the run follows")
    declare_cmd.add_argument(
        "--allowed-group",
        action="append",
        metavar="GROUP",
        help="workflow functions: a group the run may record steps in (repeatable)",
    )
    declare_cmd.add_argument(
        "--variable",
        action="append",
        metavar="SPEC",
        help="workflow functions: a typed variable (repeatable), e.g. region:string:required",
    )
    declare_cmd.set_defaults(run=declare)

    remove_cmd = functions_cmds.add_parser(
        "remove", parents=[common], help="remove a function of a target you own"
    )
    remove_cmd.add_argument("target", metavar="TARGET", help="crew:<name> or workflow:<id>")
    remove_cmd.add_argument("name", metavar="NAME", help="the function's name")
    remove_cmd.set_defaults(run=remove)
