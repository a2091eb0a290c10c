"""What the terminal allows: colour (on a TTY only, never with NO_COLOR or --no-color) and
the width tables fit in (the terminal's, or COLUMNS; unlimited into a pipe or a file)."""

from __future__ import annotations

import os
import shutil
import sys
from typing import TextIO

# SGR codes of the few styles the CLI uses.
STYLES = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "cyan": "36",
}

_no_color = False


def disable_colour() -> None:
    """--no-color: no escape codes on any stream from now on."""
    global _no_color
    _no_color = True


def colour_on(stream: TextIO) -> bool:
    """Whether to colour what goes to `stream`: a TTY, no --no-color, NO_COLOR unset or
    empty (https://no-color.org), and a terminal that is not `dumb`."""
    if _no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def paint(text: str, style: str, stream: TextIO | None = None) -> str:
    """`text` in `style` (space-separated names of STYLES) when `stream` (stdout unless
    given) takes colour; else `text` as it is."""
    if not text or not colour_on(sys.stdout if stream is None else stream):
        return text
    codes = ";".join(STYLES[name] for name in style.split())
    return f"\x1b[{codes}m{text}\x1b[0m"


def table_width() -> int | None:
    """The columns a table may use: COLUMNS when set, else the terminal's width when stdout
    is a terminal; None (no limit) into a pipe or a file, where cut cells would lose data."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def fit_widths(
    widths: list[int], minimum: list[int], limit: int | None, keep: set[int]
) -> list[int]:
    """Column widths that fit in `limit` (two spaces between columns): the widest column
    that may be cut (not in `keep`) loses a character at a time, down to its minimum."""
    widths = list(widths)
    if limit is None:
        return widths
    excess = sum(widths) + 2 * (len(widths) - 1) - limit
    while excess > 0:
        cuttable = [i for i in range(len(widths)) if i not in keep and widths[i] > minimum[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, ending with … when it was longer."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"
