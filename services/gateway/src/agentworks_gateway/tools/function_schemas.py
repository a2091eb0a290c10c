"""The JSON Schemas of `functions` and the legacy `get_crew_function_call` (F2-F15, G2).

Bounds come from `agentworks.core.limits`, the numbers the functions service checks,
so the published schema tells clients before they call.
"""

from __future__ import annotations

from typing import Any

from agentworks.core.limits import (
    MAX_EVENT_PAGE,
    MAX_MESSAGE_PAGE,
    MAX_READ_BYTES,
    MAX_SUBMISSION_ID,
    MAX_WAIT_SECONDS,
)
from agentworks_gateway.tools.toolkit import INT64_MAX, action_rule

_CALL_ID = {
    "type": "string",
    "minLength": 1,
    "description": "status, read, reply, cancel (required): the call_id from the call receipt.",
}
_STATUS_PROPERTIES: dict[str, Any] = {
    "after": {
        "type": "integer",
        "minimum": -1,
        "maximum": INT64_MAX,
        "description": "status: execution messages after this index; start at -1, then pass "
        "next_after (default -1).",
    },
    "message_limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_MESSAGE_PAGE,
        "description": f"status: at most this many messages (1-{MAX_MESSAGE_PAGE}, default 50).",
    },
    "after_event": {
        "type": "integer",
        "minimum": -1,
        "maximum": INT64_MAX,
        "description": "status: conversation events after this index; start at -1, then pass "
        "next_after_event (default -1). Raw tool arguments and results are never included.",
    },
    "event_limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_EVENT_PAGE,
        "description": f"status: at most this many events (1-{MAX_EVENT_PAGE}, default 50).",
    },
    "wait_seconds": {
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_WAIT_SECONDS,
        "description": "status: while the call is open and nothing is new after the cursors, "
        f"wait up to this many seconds for a change (0-{MAX_WAIT_SECONDS}, default 0). Reading "
        "never starts, steers or interrupts the execution. call: wait up to this long for "
        "the call to end; if it does, the receipt includes `outcome`, its final status.",
    },
    "seen_version": {
        "type": "integer",
        "minimum": 0,
        "maximum": INT64_MAX,
        "description": "status: the version of the last status you saw; with wait_seconds, "
        "answer at once if the call changed since then.",
    },
}
_READ_PROPERTIES: dict[str, Any] = {
    "file": {
        "type": "string",
        "minLength": 1,
        "description": "read (required): a file of the call, as listed in status files "
        "(a path inside the call's output folder, e.g. report.csv).",
    },
    "offset": {
        "type": "integer",
        "minimum": 0,
        "maximum": INT64_MAX,
        "description": "read: byte offset to start at (default 0); then pass next_offset.",
    },
    "limit": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_READ_BYTES,
        "description": f"read: at most this many bytes (1-{MAX_READ_BYTES}, default 65536).",
    },
}
_STATUS_FIELDS = ("call_id", *_STATUS_PROPERTIES)
_READ_FIELDS = ("call_id", *_READ_PROPERTIES)
# Which crew or workflow: list and call name it; status and read (and the legacy tool)
# may, and then it is checked against the call.
_TARGET_PROPERTIES: dict[str, Any] = {
    "crew": {
        "type": "string",
        "minLength": 1,
        "description": "list, call: the crew's name. Give exactly one of crew and "
        "workflow_id (status, read, reply, cancel: optional, checked against the call).",
    },
    "workflow_id": {
        "type": "string",
        "minLength": 1,
        "description": "list, call: the workflow's id (status, read, reply, cancel: "
        "optional, checked against the call).",
    },
}

FUNCTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["list", "call", "status", "read", "reply", "cancel"],
            "description": "list: the functions you may call on a crew or workflow. call: run "
            "one with checked inputs; returns a call_id. status: the call's status, progress, "
            "messages, events, answer, result, error and files. read: a page of one of its "
            "files. reply: answer its pending question. cancel: stop it.",
        },
        **_TARGET_PROPERTIES,
        "function": {
            "type": "string",
            "minLength": 1,
            "description": "call (required): the function's name, from list.",
        },
        "inputs": {
            "type": "object",
            "description": "call: the inputs, checked against the function's input_schema "
            "before anything runs (default {}).",
        },
        "submission_id": {
            "type": "string",
            "maxLength": MAX_SUBMISSION_ID,
            "description": f"call: optional retry key (at most {MAX_SUBMISSION_ID} characters). "
            "Calling again with the same key returns "
            "the existing call (same call_id) instead of starting new work; the same key with "
            "other inputs is refused.",
        },
        "call_id": _CALL_ID,
        **_STATUS_PROPERTIES,
        **_READ_PROPERTIES,
        "text": {
            "type": "string",
            "minLength": 1,
            "description": "reply (required): the answer to the call's pending question.",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

FUNCTIONS_ACTIONS = (
    action_rule("list", ("crew", "workflow_id"), one_of=("crew", "workflow_id")),
    action_rule(
        "call",
        ("crew", "workflow_id", "function", "inputs", "submission_id", "wait_seconds"),
        required=("function",),
        one_of=("crew", "workflow_id"),
    ),
    # A call is named by its call_id; a crew or workflow_id given as well (as the
    # CLI's `functions call-status --workflow` does) must be the call's target.
    *(
        action_rule(
            action,
            (*fields, "crew", "workflow_id"),
            required=required,
            one_of=("crew", "workflow_id"),
            one_of_required=False,
        )
        for action, fields, required in (
            ("status", _STATUS_FIELDS, ("call_id",)),
            ("read", _READ_FIELDS, ("call_id", "file")),
            ("reply", ("call_id", "text"), ("call_id", "text")),
            ("cancel", ("call_id",), ("call_id",)),
        )
    ),
)

LEGACY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call_id": {**_CALL_ID, "description": "The call_id from the call receipt (required)."},
        **{
            name: {**prop, "description": prop["description"].removeprefix("status: ")}
            for name, prop in _STATUS_PROPERTIES.items()
        },
        **{
            name: {
                **prop,
                "description": prop["description"]
                .removeprefix("read (required): ")
                .removeprefix("read: "),
            }
            for name, prop in _READ_PROPERTIES.items()
        },
        # As for functions action=status and action=read (G2): optional, checked against
        # the call; the handler refuses both at once.
        "crew": {
            **_TARGET_PROPERTIES["crew"],
            "description": "Optional: the call's crew (its name), checked against the call. "
            "Give at most one of crew and workflow_id.",
        },
        "workflow_id": {
            **_TARGET_PROPERTIES["workflow_id"],
            "description": "Optional: the call's workflow (its id), checked against the call.",
        },
    },
    "required": ["call_id"],
    "additionalProperties": False,
}
# With `file` the legacy tool reads a page (these arguments), without it the status;
# `functions.get_crew_function_call` checks that (the schema stays flat).
LEGACY_READ_FIELDS = (*_READ_FIELDS, *_TARGET_PROPERTIES)
LEGACY_STATUS_FIELDS = (*_STATUS_FIELDS, *_TARGET_PROPERTIES)
LEGACY_SCHEMA["properties"]["wait_seconds"]["description"] = (
    "While the call is open and nothing is new after the cursors, wait up to this many "
    f"seconds for a change (0-{MAX_WAIT_SECONDS}, default 0)."
)
LEGACY_SCHEMA["properties"]["file"]["description"] = (
    "Read this file of the call instead of its status (with offset and limit)."
)
