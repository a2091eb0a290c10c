"""The owner's `declarations` tool (F1), HTTP API only: declare or remove a function.

The functions service checks ownership, names, schemas and sizes.
"""

from __future__ import annotations

from typing import Any

from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_ALLOWED_CALLERS
from agentworks_gateway.tools.function_views import function_dict
from agentworks_gateway.tools.toolkit import Args, Tool, action_rule, check_target


async def declarations(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`declarations` (owner, HTTP API only): declare or remove a function (F1)."""
    target = check_target(args["target"])
    client = gateway.functions(identity)
    if args["action"] == "remove":
        await client.remove_function(target, args["name"])
        return {"removed": True, "target": target, "name": args["name"]}
    function = await client.declare_function(
        target,
        args["name"],
        input_schema=args["input_schema"],
        description=args.get("description", ""),
        output_schema=args.get("output_schema"),
        allowed_callers=args.get("allowed_callers", ()),
        starts_work=args.get("starts_work", False),
        workflow=args.get("workflow"),
    )
    return function_dict(function)


# -------------------------------------------------------------------------- schemas

_VARIABLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "type": {
            "type": "string",
            "enum": ["string", "integer", "number", "boolean", "object", "array"],
        },
        "default": {},
        "required": {"type": "boolean"},
    },
    "required": ["name", "type"],
    "additionalProperties": False,
}

DECLARATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["declare", "remove"],
            "description": "declare (owner): create or replace a function. remove (owner): "
            "delete one; its calls stay readable.",
        },
        "target": {
            "type": "string",
            "pattern": "^(crew|workflow):.+$",
            "description": "crew:<name> or workflow:<id>.",
        },
        "name": {
            "type": "string",
            "minLength": 1,
            "description": "The function's name: 1-64 letters, digits, '_', '.', '-', starting "
            "with a letter.",
        },
        "description": {
            "type": "string",
            "description": "declare: what the function does, for callers (at most 4 KiB).",
        },
        "input_schema": {
            "type": "object",
            "description": "declare (required): JSON Schema 2020-12 of the inputs, an object "
            'schema; a function without inputs declares {"type": "object", '
            '"additionalProperties": false}.',
        },
        "output_schema": {
            "type": "object",
            "description": "declare: optional JSON Schema 2020-12 of the result the execution "
            "writes to FUNCTION_RESULT_FILE.",
        },
        "allowed_callers": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "maxItems": MAX_ALLOWED_CALLERS,
            "description": "declare: who may call besides the owner: principals (user:alice) or "
            "patterns (*, user:*, agent:*, workflow:*, service:*, agent:<crew>/*).",
        },
        "starts_work": {
            "type": "boolean",
            "description": "declare: the function only starts work and completes with its "
            "start receipt (default false).",
        },
        "workflow": {
            "type": "object",
            "properties": {
                "route": {"type": "string", "minLength": 1},
                "allowed_groups": {"type": "array", "items": {"type": "string"}},
                "variables": {"type": "array", "items": _VARIABLE},
            },
            "required": ["route"],
            "additionalProperties": False,
            "description": "declare, workflow targets (required there): {route, allowed_groups, "
            "variables: [{name, type, default?, required?}]}.",
        },
    },
    "required": ["action", "target", "name"],
    "additionalProperties": False,
}

DECLARATIONS_ACTIONS = (
    action_rule(
        "declare",
        (
            "target",
            "name",
            "description",
            "input_schema",
            "output_schema",
            "allowed_callers",
            "starts_work",
            "workflow",
        ),
        required=("input_schema",),
    ),
    action_rule("remove", ("target", "name")),
)


DECLARATION_TOOLS = (
    Tool(
        "declarations",
        "Declare or remove a function of a crew or workflow (owner tool, HTTP API only).",
        DECLARATIONS_SCHEMA,
        declarations,
        mcp=False,
        actions=DECLARATIONS_ACTIONS,
    ),
)
