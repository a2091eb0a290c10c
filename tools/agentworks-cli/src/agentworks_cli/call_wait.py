"""`crews call --wait` / `functions call --wait`: follow a call until it ends (F7, F11, G3).

The first status read answers at once (wait_seconds 0), so what the call is doing shows
straight away; later reads long-poll for a change (seen_version). Progress, execution
messages and a question go to stderr as they happen, with the time since the call was
accepted; while no runtime has claimed the call (`started` false) it says so. On a
terminal the state is one line redrawn every second; into a pipe or a file it is a line
when it changes and one after each long-poll that brought nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks_cli.api import ApiClient
from agentworks_cli.call_output import print_status, question_note
from agentworks_cli.errors import EXIT_CALL_ENDED
from agentworks_cli.output import error, note, print_json
from agentworks_cli.terminal import paint

END_STATUSES = frozenset({"completed", "failed", "interrupted", "cancelled"})
WAIT_SECONDS = MAX_WAIT_SECONDS
STATUS_PAGE = 200  # messages and events per status read (the service's maximum)

NOT_CLAIMED = "waiting for a runtime to claim it"


def elapsed(seconds: float) -> str:
    """`7s`, `2m05s`, `1h02m`."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def state_of(status: Mapping[str, Any]) -> str:
    """What an open call is doing, in words."""
    if status["status"] == "waiting_for_input":
        return "waiting for an answer to its question"
    if not status.get("started", True):
        return NOT_CLAIMED
    return "running"


class StateLine:
    """The waited-for call's state and elapsed time on stderr (see the module's text)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.started = time.monotonic()
        self.live = self.stream.isatty()
        self.state = ""
        self._shown = False
        self._ticker: asyncio.Task[None] | None = None

    def elapsed(self) -> str:
        return elapsed(time.monotonic() - self.started)

    def say(self, text: str) -> None:
        """A note above the state line."""
        self._clear()
        note(text)
        self._draw()

    def update(self, state: str, *, quiet: bool = False) -> None:
        """The call's state after a status read; `quiet`: the read brought nothing new."""
        changed = state != self.state
        self.state = state
        if self.live:
            self._draw()
            if self._ticker is None:
                self._ticker = asyncio.get_running_loop().create_task(self._tick())
        elif changed or quiet:
            still = "still " if quiet and not changed else ""
            note(f"{still}{state} ({self.elapsed()})")

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        self._clear()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(1)
            self._draw()

    def _draw(self) -> None:
        if self.live and self.state:
            line = paint(f"… {self.state} · {self.elapsed()}", "dim", self.stream)
            self.stream.write(f"\r\x1b[K{line}")
            self.stream.flush()
            self._shown = True

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False


async def wait_for_call(
    api: ApiClient, receipt: Mapping[str, Any], args: argparse.Namespace, group: str
) -> int | None:
    """Follow the call until it ends, then print its status; exit 8 unless it completed."""
    call_id = receipt["call_id"]
    how = "accepted" if receipt["created"] else "recovered (same submission id)"
    note(
        f"call {call_id} {how}; waiting for it to end (Ctrl-C stops waiting, the call goes on: "
        f"agentworks {group} call-status --call {call_id})"
    )
    args.on_interrupt = (
        f"stopped waiting; call {call_id} goes on: agentworks {group} call-status --call "
        f"{call_id} (end it: agentworks calls cancel {call_id})"
    )
    line = StateLine()
    try:
        await _follow(api, call_id, group, line)
    finally:
        line.close()
    final = await api.call("functions", {"action": "status", "call_id": call_id})
    if args.json:
        print_json(final)
    else:
        print_status(final)
    if final["status"] != "completed":
        reason = final["error"].removeprefix(f"{final['status']}: ")  # said once is enough
        why = f": {reason}" if reason else ""
        error(f"agentworks: call {call_id} ended {final['status']}{why} (after {line.elapsed()})")
        return EXIT_CALL_ENDED
    note(f"call {call_id} completed after {line.elapsed()}")
    return None


async def _follow(api: ApiClient, call_id: str, group: str, line: StateLine) -> None:
    request: dict[str, Any] = {
        "action": "status",
        "call_id": call_id,
        "after": -1,
        "after_event": -1,
        "message_limit": STATUS_PAGE,
        "event_limit": STATUS_PAGE,
        "wait_seconds": 0,  # the first read answers at once
    }
    progress = question = None
    version: int | None = None
    while True:
        status = await api.call("functions", request)
        new = bool(status["messages"] or status["events"]) or status["version"] != version
        if status["progress"] and status["progress"] != progress:
            progress = status["progress"]
            line.say(f"progress: {progress}")
        for message in status["messages"]:
            line.say(f"{message['role']}: {message['text']}")
        if status["question"] and status["question"] != question:
            question = status["question"]
            line.say(question_note(status, group))
        if status["status"] in END_STATUSES:
            return
        line.update(state_of(status), quiet=version is not None and not new)
        version = status["version"]
        request.update(
            after=status["next_after"],
            after_event=status["next_after_event"],
            seen_version=version,
            wait_seconds=WAIT_SECONDS,
        )
