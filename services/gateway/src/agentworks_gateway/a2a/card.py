"""A target as an A2A agent card (X1): its declared functions as skills with their input
schemas, the conversation skill, bearer-token security and the JSON-RPC interface.

A2A's `AgentSkill` has no field for an input schema, so the schemas ride in a card
extension (`INPUT_SCHEMAS_EXTENSION`, params `{"skills": {<skill id>: <JSON Schema>}}`);
each function skill's description says so too. docs/a2a.md is the contract.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.struct_pb2 import Struct

from agentworks.core.jsontext import loads
from agentworks.functions.v1 import functions_pb2 as f

# The skill a message names to speak to the target's conversation (X3). A colon never
# appears in a function's name, so no function can take this id.
CONVERSATION_SKILL = "agentworks:conversation"
# Where the card puts the skills' input schemas (A2A's AgentSkill has no such field).
INPUT_SCHEMAS_EXTENSION = "urn:agentworks:a2a:input-schemas:v1"
# The message (or request) metadata key naming the skill of a SendMessage (X2).
SKILL_KEY = "skill"
BEARER = "bearer"
PROTOCOL_VERSION = "1.0"
A2A_PREFIX = "/a2a"


def agent_path(target: str) -> str:
    """`crew:demo` -> `/a2a/crew/demo`: the agent's base path (its JSON-RPC endpoint)."""
    kind, _, name = target.partition(":")
    return f"{A2A_PREFIX}/{kind}/{name}"


def agent_card(
    target: str,
    owner: str,
    functions: Sequence[f.Function],
    base_url: str,
    *,
    conversation: bool = True,
    push_notifications: bool = False,
) -> AgentCard:
    """The card of one target as the caller sees it: `functions` are those the caller
    may call (the owner and the operator: every one); `conversation`: the target takes
    conversational messages (C8's switch is on); `push_notifications`: this gateway
    serves push-notification configs on function tasks."""
    kind, _, name = target.partition(":")
    schemas = Struct()
    skills = []
    for fn in functions:
        schemas.update({fn.name: loads(fn.input_schema_json, "input_schema", {})})
        skills.append(
            AgentSkill(
                id=fn.name,
                name=fn.name,
                description=(fn.description or f"function {fn.name} of {target}")
                + " (a function call: send one data part holding the inputs; its input"
                f" schema is in the card's {INPUT_SCHEMAS_EXTENSION} extension)",
                tags=["function", "starts-work" if fn.starts_work else "completes-work"],
                input_modes=["application/json"],
                output_modes=["application/json", "text/plain"],
            )
        )
    skills += (
        []
        if not conversation
        else [
            AgentSkill(
                id=CONVERSATION_SKILL,
                name="conversation",
                description=(
                    f"Talk with {target}: a message without a skill is a message in a "
                    "conversation (contextId: the conversation's inbox). Its agents answer "
                    "when they choose, as agent messages on the stream and on GetTask; a "
                    "receipt is not an answer."
                ),
                tags=["conversation"],
                input_modes=["text/plain", "application/json"],
                output_modes=["text/plain", "application/json"],
            )
        ]
    )
    params = Struct()
    params.update({"skills": schemas})
    return AgentCard(
        name=target,
        description=f"AgentWorks {kind} {name}, owned by {owner}",
        version="1",
        provider=AgentProvider(organization="AgentWorks", url=base_url),
        supported_interfaces=[
            AgentInterface(
                url=base_url + agent_path(target),
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION,
            )
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=push_notifications,
            extensions=[
                AgentExtension(
                    uri=INPUT_SCHEMAS_EXTENSION,
                    description="each function skill's input schema (JSON Schema 2020-12)",
                    required=False,
                    params=params,
                )
            ],
        ),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="AgentWorks API token (aw_...)",
                    description="an AgentWorks API token; the agent acts as its principal",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )
