"""How the console shows times, durations and ids (V7), as template helpers.

A time is rendered as `<time datetime="<ISO>">` with the ISO text inside, which
`static/console.js` turns into a relative time ("3 min ago") with the local absolute
time as its title; without script the ISO text stays. An id comes with a copy button.
A call's timeline is built from what `functions status` returns: the call's creation,
its messages and events, and its end, each with the time since the call was made and
since the step before. A claim, a question's asking and its answer carry no time in
the status, so the timeline says they happened without inventing one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

ENDED = frozenset({"completed", "failed", "interrupted", "cancelled"})


def parse(value: str | None) -> datetime | None:
    """An ISO timestamp from a tool's result, or None when there is none."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def when(value: str | None) -> Markup:
    """A `<time>` element of an ISO timestamp (formatted in the browser), or nothing."""
    if not value:
        return Markup("")
    iso = escape(value)
    return Markup(f'<time datetime="{iso}" title="{iso}">{iso}</time>')


def copy_id(value: str | None, label: str = "id") -> Markup:
    """An id in `<code>` with a button that copies it."""
    if not value:
        return Markup("")
    text = escape(value)
    return Markup(
        f'<code class="id">{text}</code> <button type="button" class="copy" '
        f'data-copy="{text}" aria-label="Copy {escape(label)} {text}">Copy</button>'
    )


def duration(seconds: float) -> str:
    """A duration in the largest units that matter: `850 ms`, `4.2 s`, `3 min 5 s`,
    `2 h 10 min`, `3 d 4 h`."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    for unit, size, smaller, small_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= size:
            rest = (whole % size) // small_size
            return f"{whole // size} {unit}" + (f" {rest} {smaller}" if rest else "")
    return f"{whole} s"  # pragma: no cover - seconds >= 60 always has a unit above


def timeline(call: dict[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """A call's `steps` in time order: created, claimed, each message and event, each
    question asked and its answer (or withdrawal), ended; each with `at` (ISO or None),
    `after_start` and `after_previous` (durations, or "" when a time is missing); and
    the call's `total` duration (so far, while `open`)."""
    created = parse(call.get("created_at"))
    steps: list[dict[str, Any]] = [{"label": "created", "text": "", "at": call.get("created_at")}]
    record: list[dict[str, Any]] = []
    if call.get("started"):
        record.append({"label": "claimed", "text": "by a runtime", "at": call.get("claimed_at")})
    else:
        steps.append({"label": "not claimed", "text": "no runtime has taken it yet", "at": None})
    record += [
        {"label": m.get("role") or "message", "text": m.get("text", ""), "at": m.get("created_at")}
        for m in call.get("messages", [])
    ]
    record += [
        {
            "label": e.get("kind") or "event",
            "text": e.get("text", "") + (f" ({e['tool_name']})" if e.get("tool_name") else ""),
            "at": e.get("created_at"),
        }
        for e in call.get("events", [])
    ]
    for question in call.get("questions") or []:
        record += _question_steps(question)
    record.sort(key=lambda s: s["at"] or "")
    steps += record
    if call.get("status") == "waiting_for_input" and not call.get("questions"):
        steps.append({"label": "question", "text": call.get("question") or "", "at": None})
    ended = call.get("status") in ENDED
    if ended:
        steps.append({"label": call["status"], "text": "", "at": call.get("ended_at") or None})
    previous = created
    for step in steps:
        at = parse(step["at"])
        step["after_start"] = duration((at - created).total_seconds()) if at and created else ""
        first = step is steps[0]
        gap = (at - previous).total_seconds() if at and previous and not first else None
        step["after_previous"] = "" if gap is None else duration(gap)
        previous = at or previous
    end = parse(call.get("ended_at")) if ended else (now or datetime.now(UTC))
    total = duration((end - created).total_seconds()) if end and created else ""
    return {"steps": steps, "total": total, "open": not ended}


def _question_steps(question: dict[str, Any]) -> list[dict[str, Any]]:
    """A question's steps: asked (with its choices), then answered or withdrawn, saying
    how long it waited for its human."""
    text = question.get("text") or ""
    choices = question.get("choices") or []
    asked = {
        "label": "question asked",
        "text": text + (f" (choices: {', '.join(choices)})" if choices else ""),
        "at": question.get("asked_at"),
    }
    for label, key in (("answered", "answered_at"), ("withdrawn", "withdrawn_at")):
        at = question.get(key)
        if at:
            start, end = parse(question.get("asked_at")), parse(at)
            waited = f" after {duration((end - start).total_seconds())}" if start and end else ""
            return [asked, {"label": label, "text": f"{text}{waited}", "at": at}]
    return [asked]
