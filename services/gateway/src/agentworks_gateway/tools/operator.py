"""Operator tools (C1, F5, A1), HTTP API only: `targets` (register, update, set_limit, get
a crew or workflow) and `tokens` (create, list, revoke API tokens).

Messaging and functions decide who may register and change a target; the gateway's own
`Gateway` decides who may manage tokens.
"""

from __future__ import annotations

from typing import Any

from agentworks.client import target_str
from agentworks.client.registration import register_target
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_RUNNING_LIMIT
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.tools.toolkit import (
    Args,
    Tool,
    check_fields,
    check_target,
    require,
    timestamp,
)

# ------------------------------------------------------------------------ translation


def target_dict(target: m.Target) -> dict[str, Any]:
    """A crew or workflow registration (C1) as JSON; each capability is on unless false."""
    caps = target.capabilities
    return {
        "target": target_str(target.ref),
        "owner": target.owner,
        "capabilities": {
            "free_text_ask": caps.free_text_ask if caps.HasField("free_text_ask") else True,
            "a2a_card": caps.a2a_card if caps.HasField("a2a_card") else True,
        },
        "created_at": timestamp(target.created_at),
        "updated_at": timestamp(target.updated_at),
    }


# ------------------------------------------------------------------------- handlers

# The switches a target's owner sets (C1, C8, X1), each on unless false.
_CAPABILITIES = ("free_text_ask", "a2a_card")


async def _functions_registration(gateway: Any, identity: Identity, target: str) -> Any:
    """The target's registration with the functions service, or None if it has none."""
    try:
        return await gateway.functions(identity).get_target(target)
    except errors.NotFound:
        return None


def _with_limits(result: dict[str, Any], registration: Any) -> dict[str, Any]:
    """A target's JSON with the functions service's running limit (F5) added."""
    result["running_limit"] = registration.running_limit if registration else None
    result["effective_running_limit"] = (
        registration.effective_running_limit if registration else None
    )
    return result


async def targets(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`targets`: register, update, set_limit or get a crew or workflow (C1, F5).

    Each service keeps its own copy of a target: register writes the owner and
    capabilities (free_text_ask, a2a_card) to messaging, then the owner and running limit
    to functions (`agentworks.client.registration`, which `agentworks up` uses too).
    """
    action = args["action"]
    target = check_target(args.get("target", ""))
    client = gateway.messaging(identity)
    if action == "register":
        check_fields("targets", action, args, ("target", "owner", *_CAPABILITIES, "running_limit"))
        require("targets", action, args, "owner")
        result, registration = await register_target(
            client,
            gateway.functions(identity),
            target,
            owner=args["owner"],
            free_text_ask=args.get("free_text_ask"),
            a2a_card=args.get("a2a_card"),
            running_limit=args.get("running_limit", 0),
        )
        return _with_limits(target_dict(result), registration)
    if action == "update":
        check_fields("targets", action, args, ("target", *_CAPABILITIES))
        if all(args.get(name) is None for name in _CAPABILITIES):
            raise errors.InvalidArgument(
                "targets action 'update' needs free_text_ask or a2a_card (or both)",
                reason=errors.Reason.FIELD_RULE,
                metadata=errors.rule_meta(", ".join(_CAPABILITIES), "required"),
            )
        # Messaging's settings only: a functions outage must not hide that they changed.
        # A capability not given keeps its stored value.
        updated = await client.update_target(
            target, free_text_ask=args.get("free_text_ask"), a2a_card=args.get("a2a_card")
        )
        return target_dict(updated)
    if action == "set_limit":
        check_fields("targets", action, args, ("target", "running_limit"))
        require("targets", action, args, "running_limit")
        result = await client.get_target(target)
        current = await _functions_registration(gateway, identity, target)
        registration = await gateway.functions(identity).register_target(
            target,
            owner=current.owner if current else result.owner,
            running_limit=args["running_limit"],
        )
        return _with_limits(target_dict(result), registration)
    check_fields("targets", action, args, ("target",))
    result = await client.get_target(target)
    registration = await _functions_registration(gateway, identity, target)
    return _with_limits(target_dict(result), registration)


async def tokens(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`tokens`: create, list or revoke API tokens (A1)."""
    action = args["action"]
    if action == "create":
        check_fields("tokens", action, args, ("principal", "roles", "label", "expires_in_seconds"))
        require("tokens", action, args, "principal")
        token, record = await gateway.create_token(
            identity,
            principal=args["principal"],
            roles=args.get("roles", ()),
            label=args.get("label", ""),
            expires_in_seconds=args.get("expires_in_seconds"),
        )
        return {"token": token, **record.to_dict()}
    if action == "list":
        check_fields("tokens", action, args, ("include_revoked",))
        records = await gateway.list_tokens(
            identity, include_revoked=args.get("include_revoked", False)
        )
        return {"tokens": [r.to_dict() for r in records]}
    check_fields("tokens", action, args, ("token_id",))
    require("tokens", action, args, "token_id")
    return (await gateway.revoke_token(identity, args["token_id"])).to_dict()


# -------------------------------------------------------------------------- schemas

TARGETS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["register", "update", "set_limit", "get"],
            "description": "register (operator): create or replace a crew or workflow with its "
            "owner, for messaging and for functions. update (owner or operator): change its "
            "capabilities. set_limit (operator): change its running limit. get: show it.",
        },
        "target": {
            "type": "string",
            "pattern": "^(crew|workflow):.+$",
            "description": "crew:<name> or workflow:<id>.",
        },
        "owner": {
            "type": "string",
            "description": "register (required): the owning principal, e.g. user:alice.",
        },
        "free_text_ask": {
            "type": "boolean",
            "description": "register, update: the 'Agent messaging' setting; on unless false. "
            "When false, programmatic messages to the target are refused.",
        },
        "a2a_card": {
            "type": "boolean",
            "description": "register, update: whether the gateway serves the target as an A2A "
            "agent (its agent card, the /a2a/agents listing, A2A requests); on unless false. "
            "When false the A2A binding answers as for a target that does not exist.",
        },
        "running_limit": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_RUNNING_LIMIT,
            "description": "register, set_limit (required there): how many function calls may "
            "run at once; 0 = the functions service's default. At the limit a new call is "
            "refused as busy.",
        },
    },
    "required": ["action", "target"],
    "additionalProperties": False,
}

TOKENS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "revoke"],
            "description": "create: a new API token (the secret is returned once). list: every "
            "token, without secrets. revoke: a token by id, effective immediately.",
        },
        "principal": {
            "type": "string",
            "description": "create (required): who the token acts as: user:<name>, "
            "agent:<crew>/<agent> or workflow:<id> (services sign their own identities).",
        },
        "roles": {
            "type": "array",
            "items": {"type": "string", "enum": ["operator"]},
            "uniqueItems": True,
            "description": "create: roles of the token; 'operator' may register targets and "
            "manage tokens.",
        },
        "label": {
            "type": "string",
            "maxLength": 200,
            "description": "create: a note saying what the token is for.",
        },
        "expires_in_seconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": 316_224_000,
            "description": "create: the token stops working this many seconds from now "
            "(401 saying when it expired); default never.",
        },
        "include_revoked": {
            "type": "boolean",
            "description": "list: include revoked tokens (default false).",
        },
        "token_id": {"type": "string", "description": "revoke (required): the token id (tok_...)."},
    },
    "required": ["action"],
    "additionalProperties": False,
}


OPERATOR_TOOLS = (
    Tool(
        "targets",
        "Register, update, set the running limit of, or get a crew or workflow (operator "
        "tool, HTTP API only).",
        TARGETS_SCHEMA,
        targets,
        mcp=False,
    ),
    Tool(
        "tokens",
        "Create, list or revoke API tokens (operator tool, HTTP API only).",
        TOKENS_SCHEMA,
        tokens,
        mcp=False,
    ),
)
