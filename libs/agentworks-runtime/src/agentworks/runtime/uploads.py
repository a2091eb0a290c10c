"""Uploading an execution's output folder as the call's files (F8)."""

from __future__ import annotations

import asyncio
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agentworks.client import errors

# Files the service keeps per call; past it, uploads are refused (and skipped here).
from agentworks.client.limits import MAX_FILES_PER_CALL
from agentworks.runtime.reporting import NOTE_BYTES, clean_text, describe, fit_text


class ExecutionContext(Protocol):
    """What an upload uses of an `agentworks.runtime.execution_context.ExecutionContext`."""

    @property
    def output_dir(self) -> pathlib.Path: ...

    @property
    def result_file(self) -> pathlib.Path: ...

    log: Any
    uploaded: Any
    _stats: Any

    async def upload_file(self, *args: Any, **kwargs: Any) -> Any: ...

    async def message(self, text: str, *, role: str = "assistant") -> None: ...


def _read(path: pathlib.Path) -> tuple[tuple[int, int], bytes]:
    """A file's (size, modification time in ns) as read, and its bytes."""
    with path.open("rb") as file:
        stat = os.fstat(file.fileno())
        return (stat.st_size, stat.st_mtime_ns), file.read()


def _folder_files(
    folder: pathlib.Path, entries: Sequence[os.DirEntry[str]]
) -> dict[str, tuple[int, int]]:
    """The regular files under `folder` (symlinks skipped, subfolders walked), by name
    relative to it, with their (size, modification time in ns). `entries`: its top level."""
    found: dict[str, tuple[int, int]] = {}
    pending = [("", list(entries))]
    while pending:
        prefix, level = pending.pop()
        for entry in level:
            try:
                if entry.is_dir(follow_symlinks=False):
                    with os.scandir(entry.path) as inner:
                        pending.append((f"{prefix}{entry.name}/", list(inner)))
                elif entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    found[prefix + entry.name] = (stat.st_size, stat.st_mtime_ns)
            except OSError:
                continue  # removed meanwhile
    return found


async def upload_folder(ctx: ExecutionContext) -> dict[str, str]:
    """Upload the regular files left in the call's output folder (F4); those skipped,
    each with the reason.

    `result.json` (FUNCTION_RESULT_FILE) goes first. Symlinks are skipped without a word;
    so is a file the handler uploaded itself (`ExecutionContext.upload_file`) that has not
    changed since. A file the service refuses, or that cannot be read, is skipped and the
    rest are still uploaded; the skipped files are logged and named, with the reasons, in
    one message (role `runner`) on the call. An empty folder costs one scandir.
    """
    folder = ctx.output_dir
    try:
        with os.scandir(folder) as entries:
            top = list(entries)
    except OSError:  # the handler removed its folder
        return {}
    if not top:
        return {}
    found = await asyncio.to_thread(_folder_files, folder, top)
    result = ctx.result_file.name
    names = sorted(found, key=lambda name: (name != result, name))
    skipped: dict[str, str] = {}
    for name in names:
        if ctx._stats.get(name) == found[name]:
            continue  # uploaded as it is now
        reason = ""
        if len(ctx.uploaded) >= MAX_FILES_PER_CALL and name not in ctx.uploaded:
            reason = f"the call already has {MAX_FILES_PER_CALL} files, the most it can keep"
        elif not _is_utf8(name):
            reason = "its name is not valid UTF-8"
        else:
            try:
                await ctx.upload_file(name, path=folder / name)
            except errors.InvalidArgument as exc:
                reason = exc.message
            except OSError as exc:  # removed or unreadable meanwhile
                reason = describe(exc)
        if reason:
            ctx.log.warning("execution.file_skipped", file=name, reason=reason)
            skipped[name] = reason
    if skipped:
        await _note_skipped(ctx, skipped, len(names))
    return skipped


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in the name (surrogate escapes)
        return False
    return True


async def _note_skipped(ctx: ExecutionContext, skipped: dict[str, str], total: int) -> None:
    """Say on the call which files were not uploaded and why (one `runner` message)."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped.items():
        by_reason.setdefault(reason, []).append(name)
    parts = []
    for reason, names in by_reason.items():
        shown = ", ".join(repr(name) for name in names[:20])
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        parts.append(f"{shown}{more}: {reason}")
    text = f"{len(skipped)} of {total} files in the output folder were not uploaded: " + "; ".join(
        parts
    )
    try:
        await ctx.message(fit_text(text, NOTE_BYTES), role="runner")
    except errors.InvalidArgument as exc:  # the call's message limit: the log has it
        ctx.log.warning("execution.note_refused", error=exc.message)


def _cleaned(item: Any, field: str) -> Any:
    """A report item (a mapping or a message) with its free-text `field` cleaned; a
    message is copied when that changes it, never altered in place."""
    if isinstance(item, Mapping):
        value = item.get(field)
        return {**item, field: clean_text(value)} if isinstance(value, str) else item
    clean = clean_text(getattr(item, field))
    if clean == getattr(item, field):
        return item
    copy = type(item)()
    copy.CopyFrom(item)
    setattr(copy, field, clean)
    return copy
