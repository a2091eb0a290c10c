"""Scheduler tools (S1-S5), HTTP API only: `wake_ups`, `schedules`, `pauses`, `webhooks`.

The scheduler decides who may do what: operators and the agents serving a
conversation's target attach wake-ups, schedules and webhooks (operators may state a
`product`); pauses need the operator role. Handlers only translate.
"""

from __future__ import annotations

from typing import Any

from agentworks.client import errors
from agentworks.client.identity import Identity
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks_gateway.toolkit import INT64_MAX, Args, Tool, action_rule, parse_time, timestamp

WEBHOOK_PATH = "/webhooks/{webhook_id}"
LIST_LIMIT_MAX = 200
PREVIEW_MAX = 100

# ------------------------------------------------------------------------ translation


def _status_name(value: int) -> str:
    return s.WakeUpStatus.Name(value).removeprefix("WAKE_UP_STATUS_").lower()


def wake_up_dict(wake_up: s.WakeUp) -> dict[str, Any]:
    """A wake-up (S1) as JSON; status is pending, fired, cancelled or failed."""
    return {
        "wake_up_id": wake_up.wake_up_id,
        "conversation_id": wake_up.conversation_id,
        "status": _status_name(wake_up.status),
        "due_at": timestamp(wake_up.due_at),
        "note": wake_up.note,
        "product": wake_up.product,
        "created_by": wake_up.created_by,
        "created_at": timestamp(wake_up.created_at),
        "fired_at": timestamp(wake_up.fired_at),
        "delivery_id": wake_up.delivery_id or None,
        "late_seconds": wake_up.late_seconds,
        "error": wake_up.error or None,
    }


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


def pause_state_dict(state: s.PauseState) -> dict[str, Any]:
    """The pauses in force (S3): global, and per product."""
    return {
        "global_paused": state.global_paused,
        "paused_products": list(state.paused_products),
        "pauses": [
            {
                "product": entry.product or None,
                "reason": entry.reason,
                "paused_by": entry.paused_by,
                "paused_at": timestamp(entry.paused_at),
            }
            for entry in state.pauses
        ],
    }


def webhook_dict(webhook: s.Webhook) -> dict[str, Any]:
    """A webhook (S5); `secret` only right after create or rotate, `path` on the gateway."""
    out: dict[str, Any] = {
        "webhook_id": webhook.webhook_id,
        "path": WEBHOOK_PATH.format(webhook_id=webhook.webhook_id),
        "conversation_id": webhook.conversation_id,
        "name": webhook.name,
        "product": webhook.product,
        "secret_fingerprint": webhook.secret_fingerprint,
        "created_by": webhook.created_by,
        "created_at": timestamp(webhook.created_at),
        "secret_rotated_at": timestamp(webhook.secret_rotated_at),
    }
    if webhook.secret:
        out["secret"] = webhook.secret
    return out


# ------------------------------------------------------------------------- handlers


def _when(args: Args) -> dict[str, Any]:
    if "at" in args:
        return {"at": parse_time(args["at"], "at")}
    return {"delay_seconds": args["delay_seconds"]}


def _list_args(args: Args) -> dict[str, Any]:
    return {
        "conversation_id": args.get("conversation_id", ""),
        "product": args.get("product", ""),
        "after": args.get("after", ""),
        "limit": args.get("limit", 0),
    }


async def wake_ups(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`wake_ups`: create, list, get, cancel, reschedule (S1)."""
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "create":
        return wake_up_dict(
            await client.create_wake_up(
                args["conversation_id"],
                note=args.get("note", ""),
                product=args.get("product", ""),
                submission_id=args.get("submission_id"),
                **_when(args),
            )
        )
    if action == "list":
        page = await client.list_wake_ups(
            include_finished=args.get("include_finished", False), **_list_args(args)
        )
        return {
            "wake_ups": [wake_up_dict(w) for w in page.wake_ups],
            "next_cursor": page.next_cursor,
        }
    if action == "get":
        return wake_up_dict(await client.get_wake_up(args["wake_up_id"]))
    if action == "cancel":
        return wake_up_dict(await client.cancel_wake_up(args["wake_up_id"]))
    return wake_up_dict(await client.reschedule_wake_up(args["wake_up_id"], **_when(args)))


def _rule(args: Args, *, required: bool) -> dict[str, Any]:
    if "cron" in args:
        return {"cron": args["cron"], "time_zone": args.get("time_zone", "")}
    if "interval_seconds" in args:
        if args.get("time_zone"):
            raise errors.InvalidArgument(
                "time_zone applies to cron rules; an interval needs none: drop time_zone"
            )
        return {"interval_seconds": args["interval_seconds"]}
    if args.get("time_zone"):
        raise errors.InvalidArgument("time_zone goes with a cron rule: give cron too")
    if required:
        raise errors.InvalidArgument("give cron (with time_zone) or interval_seconds")
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
            **_rule(args, required=True),
        )
    elif action == "list":
        page = await client.list_schedules(**_list_args(args))
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
            **_rule(args, required=False),
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
                "a rule (cron with time_zone) instead of schedule_id"
            )
        rule = {} if schedule_id else _rule(args, required=True)
        times = await client.preview_schedule(
            schedule_id or None,
            count=args.get("count", 0),
            after=parse_time(after, "after") if after else None,
            **rule,
        )
        return {"fire_times": [t.isoformat() for t in times]}
    return schedule_dict(schedule)


def _not_paused_note(product: str, state: s.PauseState) -> str:
    """What a resume that lifted nothing says: the scope was not paused, and what is."""
    scope = f"{product} was not paused" if product else "there was no global pause"
    in_force = [entry.product or "(global)" for entry in state.pauses]
    if not in_force:
        return f"{scope}; no pauses are in force: timers fire"
    return (
        f"{scope}; pauses in force: {', '.join(in_force)} — resume names a scope exactly "
        "as it was paused"
    )


async def pauses(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`pauses`: pause or resume timers globally or for a product; status (S3).

    resume adds `resumed` (whether a pause was lifted) and, when none was, a `note`
    saying so and naming the pauses in force.
    """
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "pause":
        state = await client.pause(args.get("product", ""), reason=args.get("reason", ""))
    elif action == "resume":
        product = args.get("product", "")
        state = await client.resume(product)
        note = None if state.resumed else _not_paused_note(product, state)
        return {**pause_state_dict(state), "resumed": state.resumed, "note": note}
    else:
        state = await client.pause_state()
    return pause_state_dict(state)


async def webhooks(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`webhooks`: create, list, get, rotate (new secret), delete (S5)."""
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "create":
        webhook = await client.create_webhook(
            args["conversation_id"],
            name=args.get("name", ""),
            product=args.get("product", ""),
            submission_id=args.get("submission_id"),
        )
    elif action == "list":
        page = await client.list_webhooks(**_list_args(args))
        return {
            "webhooks": [webhook_dict(w) for w in page.webhooks],
            "next_cursor": page.next_cursor,
        }
    elif action == "get":
        webhook = await client.get_webhook(args["webhook_id"])
    elif action == "rotate":
        webhook = await client.rotate_webhook_secret(args["webhook_id"])
    else:
        await client.delete_webhook(args["webhook_id"])
        return {"deleted": True, "webhook_id": args["webhook_id"]}
    return webhook_dict(webhook)


# -------------------------------------------------------------------------- schemas


def _id(what: str, actions: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": f"{actions} (required): the {what}."}


_CONVERSATION = {
    "type": "string",
    "minLength": 1,
    "description": "create (required): the conversation it prompts; list: only those of this "
    "conversation.",
}
_PRODUCT = {
    "type": "string",
    "description": "create (operators): the product (crew:<name> or workflow:<id>) whose "
    "pauses hold it; default: the conversation's target. list: only this product.",
}
_AFTER_CURSOR = {
    "type": "string",
    "description": "list: the next_cursor of the previous page; omit to start at the first.",
}
_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": LIST_LIMIT_MAX,
    "description": f"list: at most this many (1-{LIST_LIMIT_MAX}, default 50).",
}
_LIST_FIELDS = ("conversation_id", "product", "after", "limit")
_TIME = {"type": "string", "minLength": 1}


def _submission_id(what: str) -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "description": f"create: a retry key. Creating again with the same key returns the "
        f"{what} the first create made instead of a second one; the same key with a "
        "different request is refused (ALREADY_EXISTS).",
    }


WAKE_UPS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "get", "cancel", "reschedule"],
            "description": "create: a durable wake-up that prompts a conversation's agents "
            "again (operators, or the agents serving the conversation's target). list: "
            "wake-ups you may see (pending unless include_finished). get: one. cancel: stop "
            "a pending one. reschedule: give a pending one a new time.",
        },
        "wake_up_id": _id("wake-up id", "get, cancel, reschedule"),
        "conversation_id": {
            "type": "string",
            "minLength": 1,
            "description": "create (required): the conversation it prompts; list: only the "
            "wake-ups of this conversation.",
        },
        "product": _PRODUCT,
        "note": {
            "type": "string",
            "description": "create: the text the agents get with the wake-up (at most 16 KiB).",
        },
        "submission_id": _submission_id("wake-up"),
        "include_finished": {
            "type": "boolean",
            "description": "list: also fired, cancelled and failed wake-ups (default false).",
        },
        "after": _AFTER_CURSOR,
        "limit": _LIMIT,
        "at": {
            **_TIME,
            "description": "create, reschedule: the time, ISO 8601 with an offset "
            "(2026-01-31T09:00:00Z); at most 1 hour past, 400 days ahead. Give at or "
            "delay_seconds.",
        },
        "delay_seconds": {
            "type": "integer",
            "minimum": 0,
            "maximum": INT64_MAX,
            "description": "create, reschedule: fire this many seconds from now (0 = next tick).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
    "allOf": [
        action_rule(
            "create",
            ("conversation_id", "at", "delay_seconds", "note", "product", "submission_id"),
            required=("conversation_id",),
            one_of=("at", "delay_seconds"),
        ),
        action_rule("list", (*_LIST_FIELDS, "include_finished")),
        action_rule("get", ("wake_up_id",), required=("wake_up_id",)),
        action_rule("cancel", ("wake_up_id",), required=("wake_up_id",)),
        action_rule(
            "reschedule",
            ("wake_up_id", "at", "delay_seconds"),
            required=("wake_up_id",),
            one_of=("at", "delay_seconds"),
        ),
    ],
}

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
        "schedule_id": _id(
            "schedule id", "get, update, pause, resume, delete; preview: a saved schedule"
        ),
        "conversation_id": _CONVERSATION,
        "prompt": {
            "type": "string",
            "minLength": 1,
            "description": "create (required), update: the text each occurrence delivers "
            "(at most 16 KiB).",
        },
        "name": {
            "type": "string",
            "maxLength": 200,
            "description": "create, update: a label.",
        },
        "product": _PRODUCT,
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
            **_TIME,
            "description": "create, interval rules: the first occurrence, ISO 8601 with an "
            "offset (default now + interval).",
        },
        "paused": {"type": "boolean", "description": "create: create it paused."},
        "submission_id": _submission_id("schedule"),
        "after": {
            "type": "string",
            "description": "list: the next_cursor of the previous page. preview: fire times "
            "strictly after this time, ISO 8601 with an offset (default now).",
        },
        "limit": _LIMIT,
        "count": {
            "type": "integer",
            "minimum": 1,
            "maximum": PREVIEW_MAX,
            "description": f"preview: how many fire times (1-{PREVIEW_MAX}, default 5).",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
    "allOf": [
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
        action_rule("list", _LIST_FIELDS),
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
    ],
}

PAUSES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["pause", "resume", "status"],
            "description": "pause (operator): hold timers, globally or for a product. resume "
            "(operator): lift that pause; held timers fire on the next tick. status: the "
            "pauses in force.",
        },
        "product": {
            "type": "string",
            "minLength": 1,
            "description": "pause, resume: crew:<name>, workflow:<id>, crew:* or workflow:*; "
            "omit for the global pause.",
        },
        "reason": {
            "type": "string",
            "maxLength": 500,
            "description": "pause: why, shown in status.",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
    "allOf": [
        action_rule("pause", ("product", "reason")),
        action_rule("resume", ("product",)),
        action_rule("status", ()),
    ],
}

WEBHOOKS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["create", "list", "get", "rotate", "delete"],
            "description": "create: a webhook into a conversation (inbound only: outside "
            "systems post to it); its secret is returned this once (and to a retry with the "
            "same submission_id within 24 hours, unless rotated). list, get (never the "
            "secret). rotate: a new secret, returned once; the old one stops working at "
            "once. delete.",
        },
        "webhook_id": _id("webhook id", "get, rotate, delete"),
        "conversation_id": _CONVERSATION,
        "name": {"type": "string", "maxLength": 200, "description": "create: a label."},
        "product": _PRODUCT,
        "submission_id": _submission_id("webhook"),
        "after": _AFTER_CURSOR,
        "limit": _LIMIT,
    },
    "required": ["action"],
    "additionalProperties": False,
    "allOf": [
        action_rule(
            "create",
            ("conversation_id", "name", "product", "submission_id"),
            required=("conversation_id",),
        ),
        action_rule("list", _LIST_FIELDS),
        *(
            action_rule(a, ("webhook_id",), required=("webhook_id",))
            for a in ("get", "rotate", "delete")
        ),
    ],
}

SCHEDULER_TOOLS = (
    Tool(
        "wake_ups",
        "Create, list, get, cancel or reschedule durable wake-ups (HTTP API only).",
        WAKE_UPS_SCHEMA,
        wake_ups,
        mcp=False,
    ),
    Tool(
        "schedules",
        "Create, list, get, update, pause, resume, delete or preview recurring schedules "
        "(HTTP API only).",
        SCHEDULES_SCHEMA,
        schedules,
        mcp=False,
    ),
    Tool(
        "pauses",
        "Pause or resume timers globally or for a product, or show the pauses (operator "
        "tool, HTTP API only).",
        PAUSES_SCHEMA,
        pauses,
        mcp=False,
    ),
    Tool(
        "webhooks",
        "Create, list, get, rotate or delete signed webhooks into a conversation (HTTP API "
        "only). POST events to the gateway at path, signed with the secret.",
        WEBHOOKS_SCHEMA,
        webhooks,
        mcp=False,
    ),
)
