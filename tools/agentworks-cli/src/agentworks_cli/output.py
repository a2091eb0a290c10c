"""Printing for people and scripts: JSON, aligned fields and tables (fitted to the
terminal's width), notes on stderr, times in the local zone."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from agentworks_cli.terminal import cut, fit_widths, paint, table_width
from agentworks_cli.times import local_time as local_time
from agentworks_cli.times import short_time as short_time


def print_json(data: Any, *, compact: bool = False) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None if compact else 2), flush=True)


def print_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """`key  value` lines; a key ending `_at` holds a time, shown in the local zone."""
    pairs = list(pairs)
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        if isinstance(value, bool):
            value = str(value).lower()
        elif value is None:
            value = "-"
        elif isinstance(value, list | tuple):
            value = ", ".join(map(str, value)) or "-"
        elif key.endswith("_at") and isinstance(value, str):
            value = local_time(value)
        # Continuation lines of a multi-line value stay in the value column.
        value = str(value).replace("\n", "\n" + " " * (width + 2))
        print(f"{key.ljust(width)}  {value}")
    sys.stdout.flush()


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def error(text: str) -> None:
    """A failure on stderr: `agentworks: ...`, the prefix in red on a terminal."""
    prefix, sep, rest = text.partition(": ")
    if sep and prefix == "agentworks":
        text = paint(prefix + ":", "bold red", sys.stderr) + " " + rest
    note(text)


def print_table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    empty: str,
    *,
    keep: Collection[int] = (0,),
) -> None:
    """Aligned columns with a header, fitted to the terminal's width: the widest columns
    not in `keep` (ids and times; by default the first column) are cut with …; into a
    pipe or a file nothing is cut. `empty` goes to stderr when there are no rows."""
    table = [tuple(header)] + [tuple("-" if c in (None, "") else str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    minimum = [min(w, max(len(h), 3)) for w, h in zip(widths, header, strict=True)]
    widths = fit_widths(widths, minimum, table_width(), set(keep))
    for number, row in enumerate(table):
        cells = [cut(c, w).ljust(w) for c, w in zip(row, widths, strict=True)]
        line = "  ".join(cells).rstrip()
        print(paint(line, "bold") if number == 0 else line)
    sys.stdout.flush()
    if len(table) == 1:
        note(empty)
