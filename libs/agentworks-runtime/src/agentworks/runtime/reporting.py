"""Text an execution reports, made sendable and cut to the service's limits."""

from __future__ import annotations

import re

from agentworks.core import errors

UNREPORTABLE = "the handler's answer could not be reported: "

# The worker's own note on the call (the files it could not upload).
NOTE_BYTES = 16 * 1024

# What text cannot hold to be stored and sent: NUL (PostgreSQL text refuses it) and lone
# surrogates (not encodable as UTF-8, so protobuf refuses them).
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` as the services can store it: each NUL character and lone surrogate
    replaced with U+FFFD. The runner's output and the SDK's free text both go through it."""
    if text.isascii():
        return text.replace("\x00", "\ufffd")
    return _UNSENDABLE.sub("\ufffd", text)


def fit_tail(text: str, limit: int) -> str:
    """`text` cleaned (`clean_text`) and at most `limit` UTF-8 bytes, for an error whose
    end matters most (a stderr tail): its first line (at most a quarter of `limit`), a note
    saying what was cut, and as much of its end as fits."""
    text = clean_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    head, newline, _ = text.partition("\n")
    head = fit_text(head, limit // 4) + "\n" if newline else ""
    note = f"[... cut: {len(data)} bytes in all]\n"
    room = max(0, limit - len(head.encode()) - len(note.encode()))
    kept = data[len(data) - room :].decode("utf-8", "ignore")
    if "\n" in kept:  # from the first whole line kept
        kept = kept.split("\n", 1)[1]
    return head + note + kept


def fit_text(text: str, limit: int) -> str:
    """`text` cleaned (`clean_text`) and at most `limit` UTF-8 bytes, cut at a character
    boundary with a note saying so."""
    text = clean_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = f" [... cut: {len(data)} bytes in all]"
    kept = data[: max(0, limit - len(note.encode()))].decode("utf-8", "ignore")
    return kept + note


def describe(exc: BaseException) -> str:
    """An exception as one line of an error: the service's message, or `Type: message`."""
    if isinstance(exc, errors.AgentWorksError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"
