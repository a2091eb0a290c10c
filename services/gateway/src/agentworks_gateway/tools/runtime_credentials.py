"""The `runtime_credentials` tool (T2): create, list or revoke runtime credentials, on
`/api` (like `tokens`; MCP serves the G2 tools only). `agentworks_gateway.credentials`
holds the rules (who may, for what)."""

from __future__ import annotations

from typing import Any

from agentworks.core.identity import Identity
from agentworks_gateway import credentials
from agentworks_gateway.service import MAX_EXPIRES_IN_SECONDS
from agentworks_gateway.tools.toolkit import Args, Tool, check_fields, require


def credential_dict(record: Any) -> dict[str, Any]:
    """A runtime credential's record as JSON, without its secret."""
    result = record.to_dict()
    result["credential_id"] = result.pop("token_id")
    result.pop("roles", None)  # a runtime's identity never has a role
    return result


async def runtime_credentials(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`runtime_credentials`: create (shown once), list or revoke (T2)."""
    action = args["action"]
    if action == "create":
        fields = ("principal", "targets", "label", "expires_in_seconds")
        check_fields("runtime_credentials", action, args, fields)
        require("runtime_credentials", action, args, "principal")
        secret, record = await credentials.create(
            gateway,
            identity,
            principal=args["principal"],
            targets=args.get("targets"),
            label=args.get("label", ""),
            expires_in_seconds=args.get("expires_in_seconds"),
        )
        return {"credential": secret, **credential_dict(record)}
    if action == "list":
        check_fields("runtime_credentials", action, args, ("include_revoked",))
        records = await credentials.visible(
            gateway, identity, include_revoked=args.get("include_revoked", False)
        )
        return {"runtime_credentials": [credential_dict(r) for r in records]}
    check_fields("runtime_credentials", action, args, ("credential_id",))
    require("runtime_credentials", action, args, "credential_id")
    return credential_dict(await credentials.revoke(gateway, identity, args["credential_id"]))


RUNTIME_CREDENTIALS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "revoke"],
            "description": "create: a new runtime credential for an agent or workflow (the "
            "secret is returned once; the target's owner or an operator). list: the "
            "credentials of your targets (an operator: all), without secrets. revoke: one by "
            "id; its next exchange is refused.",
        },
        "principal": {
            "type": "string",
            "pattern": "^(agent:[^/]+/.+|workflow:.+)$",
            "description": "create (required): who the runtime acts as: agent:<crew>/<agent> "
            "or workflow:<id>.",
        },
        "targets": {
            "type": "array",
            "items": {"type": "string", "pattern": "^(crew|workflow):.+$"},
            "minItems": 1,
            "uniqueItems": True,
            "description": "create: the targets the runtime serves (default: the principal's "
            "own: an agent's crew, a workflow itself; no other is allowed).",
        },
        "label": {
            "type": "string",
            "maxLength": 200,
            "description": "create: a note saying which runtime holds it.",
        },
        "expires_in_seconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_EXPIRES_IN_SECONDS,
            "description": "create: the credential stops working this many seconds from now; "
            "default never.",
        },
        "include_revoked": {
            "type": "boolean",
            "description": "list: include revoked credentials (default false).",
        },
        "credential_id": {
            "type": "string",
            "description": "revoke (required): the credential id (cred_...).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

RUNTIME_CREDENTIALS_TOOL = Tool(
    "runtime_credentials",
    "Create, list or revoke runtime credentials: what a runtime exchanges at POST "
    "/api/v1/identity for a short-lived identity of one agent, scoped to its targets.",
    RUNTIME_CREDENTIALS_SCHEMA,
    runtime_credentials,
    mcp=False,
)
