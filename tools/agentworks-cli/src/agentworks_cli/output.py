"""Printing for people and scripts: JSON, aligned fields and tables, notes on stderr, times."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def print_json(data: Any, *, compact: bool = False) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None if compact else 2), flush=True)


def print_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    pairs = list(pairs)
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        if isinstance(value, bool):
            value = str(value).lower()
        elif value is None:
            value = "-"
        elif isinstance(value, list | tuple):
            value = ", ".join(map(str, value)) or "-"
        # Continuation lines of a multi-line value stay in the value column.
        value = str(value).replace("\n", "\n" + " " * (width + 2))
        print(f"{key.ljust(width)}  {value}")
    sys.stdout.flush()


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
    """Aligned columns with a header; `empty` goes to stderr when there are no rows."""
    table = [tuple(header)] + [tuple("-" if c in (None, "") else str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.flush()
    if len(table) == 1:
        note(empty)


def short_time(value: str | None) -> str:
    return (value or "")[:19].replace("T", " ") or "-"
