"""The inputs of `call` (`--inputs-json`, `-i KEY=VALUE`) and of `functions declare`
(`--variable`), read from the command line (F3, G3)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentworks_cli.errors import UsageError

VARIABLE_TYPES = ("string", "integer", "number", "boolean", "object", "array")

INPUTS_HELP = (
    "Inputs: --inputs-json takes a JSON object (or @FILE, or - for stdin); -i KEY=VALUE sets "
    "one input and may repeat. A VALUE that is valid JSON is used as JSON (-i count=3 is the "
    "number 3, -i dry_run=true a boolean, -i 'tags=[\"a\"]' a list, -i 'id=\"7\"' the string "
    "7); anything else is a string (-i 'text=hello world')."
)


def parse_input(pair: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, value): VALUE as JSON when it parses, else the string itself."""
    key, sep, raw = pair.partition("=")
    if not sep or not key:
        raise UsageError(f"-i {pair!r}: write KEY=VALUE, e.g. -i text=hello or -i count=3")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def json_argument(value: str, what: str) -> Any:
    """A JSON value given inline, as @FILE, or as - (stdin)."""
    if value == "-":
        text, source = sys.stdin.read(), "stdin"
    elif value.startswith("@"):
        path = Path(value[1:])
        try:
            text, source = path.read_text(), str(path)
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    else:
        text, source = value, "the argument"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {source} is not valid JSON ({exc})") from None


def call_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The inputs of `call`, from --inputs-json or the -i pairs (empty: no inputs)."""
    if args.inputs_json is not None:
        given = json_argument(args.inputs_json, "--inputs-json")
        if not isinstance(given, dict):
            raise UsageError(
                f"--inputs-json must be a JSON object, got {type(given).__name__}: "
                'e.g. --inputs-json \'{"text": "hi"}\''
            )
        return given
    inputs: dict[str, Any] = {}
    for pair in args.input or ():
        key, value = parse_input(pair)
        if key in inputs:
            raise UsageError(f"-i {key}=... is given twice; give each input once")
        inputs[key] = value
    return inputs


def parse_variable(spec: str) -> dict[str, Any]:
    """`NAME:TYPE[:required][=DEFAULT]` -> a workflow variable (DEFAULT as JSON if it parses)."""
    head, sep, default = spec.partition("=")
    parts = head.split(":")
    if len(parts) not in (2, 3) or not parts[0] or (len(parts) == 3 and parts[2] != "required"):
        raise UsageError(
            f"--variable {spec!r}: write NAME:TYPE, NAME:TYPE:required or NAME:TYPE=DEFAULT, "
            "e.g. --variable region:string:required or --variable limit:integer=10"
        )
    if parts[1] not in VARIABLE_TYPES:
        raise UsageError(
            f"--variable {spec!r}: type {parts[1]!r} is not one of {', '.join(VARIABLE_TYPES)}"
        )
    variable: dict[str, Any] = {"name": parts[0], "type": parts[1], "required": len(parts) == 3}
    if sep:
        variable["default"] = parse_input(f"x={default}")[1]
    return variable
