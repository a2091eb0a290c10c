"""How a function call's status and a target's functions print for people (F1-F15)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from agentworks_cli.output import print_fields, print_table
from agentworks_cli.terminal import paint

# How a call's status looks on a terminal that takes colour.
STATUS_STYLES = {
    "completed": "green",
    "failed": "red",
    "interrupted": "red",
    "cancelled": "yellow",
    "waiting_for_input": "cyan",
}


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def _files(status: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{f['name']} ({_size(f['size'])}{', text' if f['text'] else ''})" for f in status["files"]
    )


def _result(status: Mapping[str, Any]) -> str | None:
    if not status.get("has_result"):
        return None
    return json.dumps(status["result"], ensure_ascii=False)


def _status_words(status: Mapping[str, Any]) -> str:
    """The status, saying when an open call has not been claimed by a runtime yet."""
    if status["status"] == "running" and not status.get("started", True):
        return "running (not started: waiting for a runtime of its target to claim it)"
    if status.get("start_receipt"):  # L7: the gateway's note says what it means
        return f"{paint('completed', STATUS_STYLES['completed'])} ({status['note']})"
    return paint(status["status"], STATUS_STYLES.get(status["status"], "bold"))


def choices_of(status: Mapping[str, Any]) -> list[str]:
    """The answers the pending question offers (empty: any text answers it)."""
    pending = status.get("pending_question") or {}
    return list(pending.get("choices") or ())


def _choices(status: Mapping[str, Any]) -> str | None:
    listed = choices_of(status)
    return "  ".join(f"[{i}] {c}" for i, c in enumerate(listed, 1)) or None


def question_note(status: Mapping[str, Any], group: str) -> str:
    """How a waiting call's question reads on the terminal, with how to answer it."""
    call_id = status["call_id"]
    lines = [f"{paint('question:', 'bold yellow', sys.stderr)} {status['question']}"]
    listed = choices_of(status)
    if listed:
        lines.append(f"  choices: {_choices(status)}")
        lines.append(f"  answer with: agentworks {group} reply --call {call_id} --choice N")
    else:
        lines.append(f"  answer with: agentworks {group} reply --call {call_id} 'your answer'")
    return "\n".join(lines)


def print_status(status: Mapping[str, Any]) -> None:
    """A call's status for people: fields, then the message and event pages."""
    print_fields(
        [
            ("call_id", status["call_id"]),
            ("target", status["target"]),
            ("function", status["function"]),
            ("status", _status_words(status)),
            ("progress", status["progress"] or None),
            ("question", status["question"]),
            ("choices", _choices(status)),
            ("answer", status["answer"]),
            ("result", _result(status)),
            ("error", status["error"]),
            ("files", _files(status) or None),
            ("caller", status["caller"]),
            ("created_at", status["created_at"]),
            ("claimed_at", status.get("claimed_at")),
            ("updated_at", status.get("updated_at")),
            ("ended_at", status["ended_at"]),
        ]
    )
    if status["messages"]:
        print("messages:")
        for message in status["messages"]:
            text = message["text"].replace("\n", "\n      ")
            print(f"  [{message['index']}] {message['role']}: {text}")
    if status["events"]:
        print("events:")
        for event in status["events"]:
            tool = f" ({event['tool_name']})" if event.get("tool_name") else ""
            text = event["text"].replace("\n", "\n      ")  # a stderr tail's lines, indented
            print(f"  [{event['index']}] {event['kind']}{tool}: {text}")
    print(f"next: --after {status['next_after']} --after-event {status['next_after_event']}")
    sys.stdout.flush()


def print_functions(result: Mapping[str, Any]) -> None:
    rows = []
    for fn in result["functions"]:
        schema = fn["input_schema"]
        required = set(schema.get("required", ()))
        properties = sorted(  # required inputs first
            (schema.get("properties") or {}).items(), key=lambda item: item[0] not in required
        )
        inputs = ", ".join(
            f"{name}{'*' if name in required else ''}:{prop.get('type', 'any')}"
            for name, prop in properties
        )
        description = (fn["description"] or "").splitlines()[0] if fn["description"] else ""
        rows.append(
            (
                fn["name"],
                inputs,
                "yes" if fn["output_schema"] else "no",
                "yes" if fn["starts_work"] else "no",
                description if len(description) <= 60 else description[:59] + "…",
            )
        )
    print_table(
        ("FUNCTION", "INPUTS (*required)", "RESULT", "STARTS_WORK", "DESCRIPTION"),
        rows,
        f"no functions you may call on {result['target']}",
    )
