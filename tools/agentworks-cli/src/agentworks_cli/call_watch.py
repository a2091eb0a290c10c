"""`agentworks calls watch CALL_ID`: follow a call by push until it ends (N1, F7, F11).

The gateway's call stream (`GET /api/v1/streams/calls/<call_id>`) sends the call's
status now and at each change; nothing polls. Progress, execution messages, events and
a question go to stderr as they come (as `call --wait` shows them); the call's state is
the redrawn line of `call --wait` on a terminal. When the call ends its status is
printed (`--json`: each status as one JSON line as it comes, the last one the end) and
the exit code is `call --wait`'s: 0 completed, 8 failed, interrupted or cancelled. A
dropped stream is opened again after the last message and event seen.
"""

from __future__ import annotations

import argparse
import urllib.parse
from collections.abc import Mapping
from typing import Any

from agentworks_cli import streams
from agentworks_cli.api import ApiClient, ApiError
from agentworks_cli.call_output import print_status, question_note
from agentworks_cli.call_wait import END_STATUSES, StateLine, state_of
from agentworks_cli.errors import EXIT_CALL_ENDED
from agentworks_cli.output import error, note, print_json


class _Shown:
    """What of the call was already said (a resumed stream repeats the status)."""

    def __init__(self) -> None:
        self.progress = ""
        self.question = ""
        self.messages: set[int] = set()
        self.events: set[int] = set()

    def say_news(self, status: Mapping[str, Any], line: StateLine, call_id: str) -> None:
        if status["progress"] and status["progress"] != self.progress:
            self.progress = status["progress"]
            line.say(f"progress: {self.progress}")
        for message in status["messages"]:
            if message["index"] not in self.messages:
                self.messages.add(message["index"])
                line.say(f"{message['role']}: {message['text']}")
        for event in status["events"]:
            if event["index"] not in self.events and event["kind"] != "progress":
                self.events.add(event["index"])
                line.say(f"[{event['kind']}] {event['text']}")
        group = "crews" if str(status["target"]).startswith("crew:") else "functions"
        if status["question"] and status["question"] != self.question:
            self.question = status["question"]
            line.say(question_note(status, group))


async def watch(api: ApiClient, args: argparse.Namespace) -> int | None:
    """Follow the call until it ends; print its last status; exit 8 unless it completed."""
    call_id = args.call_id
    args.on_interrupt = f"stopped watching; call {call_id} goes on"
    path = f"{streams.STREAMS_PREFIX}/calls/{urllib.parse.quote(call_id, safe='')}"
    line = StateLine()
    shown = _Shown()
    final: Mapping[str, Any] | None = None

    def retrying(exc: ApiError, pause: float) -> None:
        line.say(f"{exc.message}; reconnecting in {pause:g} s (Ctrl-C to stop)")

    try:
        async for event in streams.resuming(api, path, on_retry=retrying):
            if event.name == "end":
                break
            if event.name != "status":
                continue
            status = event.data
            if args.json:
                print_json(status, compact=True)
            else:
                shown.say_news(status, line, call_id)
            if status["status"] in END_STATUSES:
                final = status
            else:
                line.update(state_of(status))
    finally:
        line.close()
    assert final is not None  # the stream ends only after the terminal status
    if not args.json:
        print_status(final)
    if final["status"] != "completed":
        reason = (final.get("error") or "").removeprefix(f"{final['status']}: ")
        why = f": {reason}" if reason else ""
        error(f"agentworks: call {call_id} ended {final['status']}{why} (after {line.elapsed()})")
        return EXIT_CALL_ENDED
    note(f"call {call_id} completed after {line.elapsed()}")
    return None


def add_parser(calls_cmds: Any, common: argparse.ArgumentParser) -> None:
    """Add `calls watch` to the `calls` command."""
    watch_cmd = calls_cmds.add_parser(
        "watch",
        parents=[common],
        help="follow a call by push until it ends; exit 8 unless it completed",
        description="Follow a function call as it changes, pushed by the gateway's event "
        "stream (no polling): progress, messages, events and its question on stderr, then "
        "its final status (--json: every status as one JSON line). Exits 0 when it "
        "completed, 8 when it failed, was interrupted or cancelled. Ctrl-C stops watching; "
        "the call goes on.",
    )
    watch_cmd.add_argument("call_id", metavar="CALL_ID", help="the call to follow")
    watch_cmd.set_defaults(run=watch)
