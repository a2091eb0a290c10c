"""The `schedules` tool (S4), HTTP API only: create, list, get, update, pause, resume,
delete, preview."""

from __future__ import annotations

from typing import Any

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_NAME_CHARS, MAX_PREVIEW
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks_gateway.tools.scheduling import (
    CONVERSATION,
    LIST_FIELDS,
    LIST_LIMIT,
    PRODUCT,
    TIME,
    id_schema,
    list_args,
    submission_id_schema,
)
from agentworks_gateway.tools.toolkit import (
    INT64_MAX,
    Args,
    Tool,
    action_rule,
    parse_time,
    timestamp,
)

# ------------------------------------------------------------------------ translation


def recurrence_dict(rule: s.Recurrence) -> dict[str, Any]:
    """A schedule's rule: `{cron, time_zone}` or `{interval_seconds}`."""
    if rule.WhichOneof("rule") == "cron":
        return {"cron": rule.cron, "time_zone": rule.time_zone or "UTC"}
    return {"interval_seconds": rule.interval_seconds}


def schedule_dict(schedule: s.Schedule) -> dict[str, Any]:
    """A schedule (S4) as JSON."""
    return {
        "schedule_id": schedule.schedule_id,
        "name": schedule.name,
        "conversation_id": schedule.conversation_id,
        "product": schedule.product,
        "prompt": schedule.prompt,
        "recurrence": recurrence_dict(schedule.recurrence),
        "paused": schedule.paused,
        "next_fire_at": timestamp(schedule.next_fire_at),
        "last_fired_at": timestamp(schedule.last_fired_at),
        "fire_count": schedule.fire_count,
        "last_error": schedule.last_error or None,
        "created_by": schedule.created_by,
        "created_at": timestamp(schedule.created_at),
        "updated_at": timestamp(schedule.updated_at),
    }


# ------------------------------------------------------------------------- handlers


def _rule(args: Args) -> dict[str, Any]:
    """The rule arguments of a create, update or preview, for the scheduler client.

    The schema says which actions need a rule (exactly one of cron and interval_seconds);
    the scheduler checks the rule itself. What stays here: a `time_zone` that no request
    can carry (alone, without a rule; on a saved schedule's preview, whose request takes
    a schedule_id or a rule) is refused instead of dropped, which is translation; and one
    given with an interval is refused, a rule the scheduler does not have (it keeps the
    zone unused) and should own.
    """
    if "cron" in args:
        return {"cron": args["cron"], "time_zone": args.get("time_zone", "")}
    if "interval_seconds" in args:
        if args.get("time_zone"):
            raise errors.InvalidArgument(
                "time_zone applies to cron rules; an interval needs none: drop time_zone",
                reason=errors.Reason.INVALID_VALUE,
                metadata=errors.rule_meta("time_zone"),
            )
        return {"interval_seconds": args["interval_seconds"]}
    if args.get("time_zone"):
        raise errors.InvalidArgument(
            "time_zone goes with a cron rule: give cron too",
            reason=errors.Reason.INVALID_VALUE,
            metadata=errors.rule_meta("time_zone"),
        )
    return {}


async def schedules(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`schedules`: create, list, get, update, pause, resume, delete, preview (S4)."""
    client = gateway.scheduler(identity)
    action = args["action"]
    schedule_id = args.get("schedule_id", "")
    if action == "create":
        start_at = args.get("start_at")
        schedule = await client.create_schedule(
            args["conversation_id"],
            args["prompt"],
            name=args.get("name", ""),
            product=args.get("product", ""),
            start_at=parse_time(start_at, "start_at") if start_at else None,
            paused=args.get("paused", False),
            submission_id=args.get("submission_id"),
            **_rule(args),
        )
    elif action == "list":
        page = await client.list_schedules(**list_args(args))
        return {
            "schedules": [schedule_dict(x) for x in page.schedules],
            "next_cursor": page.next_cursor,
        }
    elif action == "get":
        schedule = await client.get_schedule(schedule_id)
    elif action == "update":
        schedule = await client.update_schedule(
            schedule_id,
            prompt=args.get("prompt"),
            name=args.get("name"),
            **_rule(args),
        )
    elif action == "pause":
        schedule = await client.pause_schedule(schedule_id)
    elif action == "resume":
        schedule = await client.resume_schedule(schedule_id)
    elif action == "delete":
        await client.delete_schedule(schedule_id)
        return {"deleted": True, "schedule_id": schedule_id}
    else:
        after = args.get("after")
        if schedule_id and "time_zone" in args:
            raise errors.InvalidArgument(
                "a saved schedule previews in its own time zone: drop time_zone, or preview "
                "a rule (cron with time_zone) instead of schedule_id",
                reason=errors.Reason.INVALID_VALUE,
                metadata=errors.rule_meta("time_zone"),
            )
        rule = {} if schedule_id else _rule(args)
        times = await client.preview_schedule(
            schedule_id or None,
            count=args.get("count", 0),
            after=parse_time(after, "after") if after else None,
            **rule,
        )
        return {"fire_times": [t.isoformat() for t in times]}
    return schedule_dict(schedule)


# -------------------------------------------------------------------------- schemas

SCHEDULES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "get", "update", "pause", "resume", "delete", "preview"],
            "description": "create: a recurring prompt into a conversation. list, get. update: "
            "prompt, name or rule (a new rule restarts from now). pause / resume one schedule "
            "(resume skips what was missed). delete. preview: the next fire times of a "
            "schedule or of a rule.",
        },
        "schedule_id": id_schema(
            "schedule id", "get, update, pause, resume, delete; preview: a saved schedule"
        ),
        "conversation_id": CONVERSATION,
        "prompt": {
            "type": "string",
            "minLength": 1,
            "description": "create (required), update: the text each occurrence delivers "
            "(at most 16 KiB).",
        },
        "name": {
            "type": "string",
            "maxLength": MAX_NAME_CHARS,
            "description": "create, update: a label.",
        },
        "product": PRODUCT,
        "cron": {
            "type": "string",
            "minLength": 1,
            "description": "create, update, preview: five-field cron (minute hour day-of-month "
            "month day-of-week) or @hourly/@daily/@weekly/@monthly/@yearly, read in time_zone. "
            "Give cron or interval_seconds.",
        },
        "interval_seconds": {  # the scheduler says its own (configured) range
            "type": "integer",
            "minimum": -INT64_MAX,
            "maximum": INT64_MAX,
            "description": "create, update, preview: a fixed interval (at least the scheduler's "
            "minimum, 60 s by default).",
        },
        "time_zone": {
            "type": "string",
            "minLength": 1,
            "description": "create, update, preview: IANA time zone of a cron rule "
            "(Europe/Berlin); default UTC.",
        },
        "start_at": {
            **TIME,
            "description": "create, interval rules: the first occurrence, ISO 8601 with an "
            "offset (default now + interval).",
        },
        "paused": {"type": "boolean", "description": "create: create it paused."},
        "submission_id": submission_id_schema("schedule"),
        "after": {
            "type": "string",
            "description": "list: the next_cursor of the previous page. preview: fire times "
            "strictly after this time, ISO 8601 with an offset (default now).",
        },
        "limit": LIST_LIMIT,
        "count": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PREVIEW,
            "description": f"preview: how many fire times (1-{MAX_PREVIEW}, default 5).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

SCHEDULES_ACTIONS = (
    action_rule(
        "create",
        (
            "conversation_id",
            "prompt",
            "name",
            "product",
            "cron",
            "interval_seconds",
            "time_zone",
            "start_at",
            "paused",
            "submission_id",
        ),
        required=("conversation_id", "prompt"),
        one_of=("cron", "interval_seconds"),
    ),
    action_rule("list", LIST_FIELDS),
    *(
        action_rule(a, ("schedule_id",), required=("schedule_id",))
        for a in ("get", "pause", "resume", "delete")
    ),
    action_rule(
        "update",
        ("schedule_id", "prompt", "name", "cron", "interval_seconds", "time_zone"),
        required=("schedule_id",),
        one_of=("cron", "interval_seconds"),
        one_of_required=False,
    ),
    action_rule(
        "preview",
        ("schedule_id", "cron", "interval_seconds", "time_zone", "count", "after"),
        one_of=("schedule_id", "cron", "interval_seconds"),
    ),
)

SCHEDULE_TOOL = Tool(
    "schedules",
    "Create, list, get, update, pause, resume, delete or preview recurring schedules "
    "(HTTP API only).",
    SCHEDULES_SCHEMA,
    schedules,
    mcp=False,
    actions=SCHEDULES_ACTIONS,
)
