"""What the scheduler tools (S1-S5) share: list paging arguments and schema pieces.

The scheduler decides who may do what: operators and the agents serving a
conversation's target attach wake-ups, schedules and webhooks (operators may state a
`product`); pauses need the operator role. The tool handlers only translate.
"""

from __future__ import annotations

from typing import Any

from agentworks.core.limits import MAX_LIST_PAGE, MAX_SUBMISSION_ID
from agentworks_gateway.tools.toolkit import Args


def list_args(args: Args) -> dict[str, Any]:
    """The paging and filter arguments of a list action, with the services' defaults."""
    return {
        "conversation_id": args.get("conversation_id", ""),
        "product": args.get("product", ""),
        "after": args.get("after", ""),
        "limit": args.get("limit", 0),
    }


def id_schema(what: str, actions: str) -> dict[str, Any]:
    """The schema of an id the named actions need."""
    return {"type": "string", "minLength": 1, "description": f"{actions} (required): the {what}."}


CONVERSATION = {
    "type": "string",
    "minLength": 1,
    "description": "create (required): the conversation it prompts; list: only those of this "
    "conversation.",
}
PRODUCT = {
    "type": "string",
    "description": "create (operators): the product (crew:<name> or workflow:<id>) whose "
    "pauses hold it; default: the conversation's target. list: only this product.",
}
AFTER_CURSOR = {
    "type": "string",
    "description": "list: the next_cursor of the previous page; omit to start at the first.",
}
LIST_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_LIST_PAGE,
    "description": f"list: at most this many (1-{MAX_LIST_PAGE}, default 50).",
}
LIST_FIELDS = ("conversation_id", "product", "after", "limit")
TIME = {"type": "string", "minLength": 1}


def submission_id_schema(what: str) -> dict[str, Any]:
    """The schema of a create's retry key (the scheduler keeps it, S1, S4, S5)."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_SUBMISSION_ID,
        "description": f"create: a retry key. Creating again with the same key returns the "
        f"{what} the first create made instead of a second one; the same key with a "
        "different request is refused (ALREADY_EXISTS).",
    }
