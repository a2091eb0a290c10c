"""Pieces of the agent tools' JSON Schemas, built from the contract's limits (L1, P6).

Every input schema is flat and OpenAI-strict as given (L10): `type: object`, properties
of simple types (or arrays of them, items typed), every property listed in `required`,
`additionalProperties: false`, no composition keywords; an optional field is nullable
(`"type": ["integer", "null"]`) and `null` means "not given"; closed sets are enums.
OpenAI (strict or not) and Anthropic take it as it is. Lengths are in characters (JSON
Schema's unit); the services check bytes.
"""

from __future__ import annotations

from typing import Any

from agentworks.core import limits

TARGET_PATTERN = r"^(crew|workflow):[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


def types(schema: dict[str, Any]) -> list[str]:
    """A property's `type` as a list (`"integer"` and `["integer", "null"]` alike)."""
    kind = schema.get("type")
    if kind is None:
        return []
    return list(kind) if isinstance(kind, list) else [kind]


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also takes `null` (meaning "not given"): its type gains "null", and
    its enum, if any, the value null (OpenAI strict mode's way to say optional)."""
    out = dict(schema)
    kinds = types(out)
    out["type"] = kinds if "null" in kinds else [*kinds, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def is_nullable(schema: dict[str, Any]) -> bool:
    """Whether a property takes null: an optional field of a strict schema."""
    return "null" in types(schema)


def obj(properties: dict[str, dict[str, Any]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A flat, OpenAI-strict object schema (L10): every property listed in `required`,
    those not in `required` nullable (null means "not given"), no other fields allowed."""
    unknown = set(required) - set(properties)
    if unknown:
        raise ValueError(f"required names unknown properties: {sorted(unknown)}")
    return {
        "type": "object",
        "properties": {
            name: prop if name in required else nullable(prop) for name, prop in properties.items()
        },
        "required": list(properties),
        "additionalProperties": False,
    }


def enum(description: str, choices: tuple[str, ...]) -> dict[str, Any]:
    """A string from a closed set."""
    return {"type": "string", "description": description, "enum": list(choices)}


def text(description: str, max_length: int, *, min_length: int = 1) -> dict[str, Any]:
    return {
        "type": "string",
        "description": description,
        "minLength": min_length,
        "maxLength": max_length,
    }


def identifier(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description, "minLength": 1, "maxLength": 200}


def integer(description: str, minimum: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "description": description, "minimum": minimum, "maximum": maximum}


TARGET = {
    "type": "string",
    "description": "A crew or workflow: 'crew:<name>' or 'workflow:<id>'.",
    "pattern": TARGET_PATTERN,
}

AFTER_SECONDS = integer(
    "Seconds from now until the wake-up is due. Give this or 'at', not both.",
    0,
    int(limits.MAX_DELAY.total_seconds()),
)
AT = {
    "type": "string",
    "description": "When the wake-up is due, an RFC 3339 time with its offset, e.g. "
    "'2026-12-02T09:00:00Z'. Give this or 'after_seconds', not both.",
    "minLength": 10,
    "maxLength": 64,
}
WAKE_UP_ID = identifier("The wake_up_id from request_wake_up or list_wake_ups.")
CALL_ID = identifier("The call_id from call_function's receipt.")
WAIT_SECONDS = integer(
    f"Wait up to this many seconds (0-{limits.MAX_WAIT_SECONDS}) for the call to end; the "
    "receipt then carries its outcome. 0 returns at once.",
    0,
    limits.MAX_WAIT_SECONDS,
)


# What each field of a result means (the output schemas' descriptions, L11).
RESULT_FIELDS = {
    "accepted": "true: the message was stored (a receipt, never an answer).",
    "message_id": "The stored message's id.",
    "conversation_id": "The conversation the message is in.",
    "inbox_id": "Where its replies come back; continue_conversation takes it.",
    "wake_up_id": "The wake-up's id.",
    "due_at": "When it is (or was) due, RFC 3339 UTC.",
    "note": "Its note.",
    "call_id": "The call's id (get_function_call reads it).",
    "created": "false: a retry with the same submission_id got the existing call.",
    "output_folder": "Where the call's files are kept.",
    "outcome": "The call as it ended, when wait_seconds saw it end.",
    "progress": "Its latest progress line.",
    "question": "The question it is waiting_for_input on (reply_function_call answers).",
    "answer": "Its final message (the last stdout line of a command).",
    "result": "Its validated result JSON, for a function with an output schema.",
    "error": "Why it failed.",
    "files": "Its files: name, size, media_type.",
    "target": "The crew or workflow called.",
    "function": "The function called.",
    "messages": "Its execution messages after the cursor: index, role, text.",
    "next_after": "Pass as after to read the messages that follow.",
    "ended_at": "When it ended, RFC 3339 UTC.",
    "next_cursor": "Pass as after for the next page.",
}
CALL_STATES = "running, waiting_for_input, completed, failed, interrupted or cancelled"


def described(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the description RESULT_FIELDS has for `name`."""
    return {**schema, "description": RESULT_FIELDS[name]}


def receipt_schema(*fields: str) -> dict[str, Any]:
    """An output schema: an object with these string/boolean fields always there."""
    props: dict[str, Any] = {
        name: described(
            name, {"type": "boolean"} if name in ("accepted", "created") else {"type": "string"}
        )
        for name in fields
    }
    return {"type": "object", "properties": props, "required": list(fields)}


SEND_RECEIPT = receipt_schema("accepted", "message_id", "conversation_id", "inbox_id")
WAKE_UP = {
    "type": "object",
    "properties": {
        "wake_up_id": described("wake_up_id", {"type": "string"}),
        "status": {
            "type": "string",
            "enum": ["pending", "fired", "cancelled", "failed"],
            "description": "pending until it fires; cancelled by cancel_wake_up.",
        },
        "due_at": described("due_at", {"type": "string"}),
        "note": described("note", {"type": "string"}),
    },
    "required": ["wake_up_id", "status", "due_at"],
}
CALL_STATUS = {
    "type": "object",
    "properties": {
        "call_id": described("call_id", {"type": "string"}),
        "target": described("target", {"type": "string"}),
        "function": described("function", {"type": "string"}),
        "status": {"type": "string", "description": f"{CALL_STATES}; the last four are ends."},
        "progress": described("progress", {"type": "string"}),
        "question": described("question", {"type": "string"}),
        "answer": described("answer", {"type": "string"}),
        "result": described("result", {}),
        "error": described("error", {"type": "string"}),
        "messages": described("messages", {"type": "array", "items": {"type": "object"}}),
        "next_after": described("next_after", {"type": "integer"}),
        "files": described("files", {"type": "array", "items": {"type": "object"}}),
        "ended_at": described("ended_at", {"type": "string"}),
    },
    "required": ["call_id", "status"],
}
CALL_RECEIPT = {
    "type": "object",
    "properties": {
        "call_id": described("call_id", {"type": "string"}),
        "status": {"type": "string", "description": f"{CALL_STATES} (running unless waited)."},
        "created": described("created", {"type": "boolean"}),
        "output_folder": described("output_folder", {"type": "string"}),
        "outcome": described("outcome", CALL_STATUS),
    },
    "required": ["call_id", "status", "created"],
}
OK = {
    "type": "object",
    "properties": {"ok": {"type": "boolean", "description": "true: it was recorded."}},
    "required": ["ok"],
}
