"""Uploading an execution's output folder as the call's files (F8)."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import pathlib
import stat
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agentworks.core import errors

# Files the service keeps per call; past it, uploads are refused (and skipped here).
from agentworks.core.limits import MAX_FILES_PER_CALL
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.reporting import NOTE_BYTES, clean_text, describe, fit_text
from agentworks.runtime.sizes import GIB, size_text

# The most the files of one call may total, for any handler (the command runner uses
# its target's `output_bytes` limit instead, T8).
DEFAULT_UPLOAD_BYTES = 1 * GIB
# The entries of an output folder looked at (B4): past them, the rest are skipped.
MAX_FOLDER_ENTRIES = 100_000
# The summary of the files not uploaded (B4, B10): one `runner` message and one event of
# this kind on the call, one log line; per reason a few names; all bounded (a summary
# is under 4 KiB as JSON, within an event's 8 KiB, whatever the number of files).
SKIPPED_EVENT = "files_skipped"
SUMMARY_REASONS = 8
SUMMARY_EXAMPLES = 5
SUMMARY_NAME_CHARS = 60
SUMMARY_REASON_CHARS = 200


class ExecutionContext(Protocol):
    """What an upload uses of an `agentworks.runtime.execution_context.ExecutionContext`."""

    @property
    def output_dir(self) -> pathlib.Path: ...

    @property
    def result_file(self) -> pathlib.Path: ...

    log: Any
    uploaded: Any
    _stats: Any
    file_owner: int | None
    upload_limit_bytes: int
    upload_sizes: dict[str, int]

    async def upload_file(self, *args: Any, **kwargs: Any) -> Any: ...

    async def report(self, *args: Any, **kwargs: Any) -> None: ...


def _read(path: pathlib.Path) -> tuple[tuple[int, int], bytes]:
    """A file's (size, modification time in ns) as read, and its bytes."""
    with path.open("rb") as file:
        found = os.fstat(file.fileno())
        return (found.st_size, found.st_mtime_ns), file.read()


class Refused(Exception):
    """A folder file that is not uploaded (T8); the message says why."""


def file_kind(mode: int) -> str:
    """What a file of this `st_mode` is, in words (an upload's refusal, a leftover)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISREG(mode):
        return "a file"
    return "not a regular file"


def _open_in(folder: pathlib.Path, name: str) -> int:
    """A descriptor of `folder/name`, opened one component at a time without following
    a symlink anywhere (O_NOFOLLOW), nor blocking on a FIFO put there meanwhile."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(folder, flags | os.O_DIRECTORY)
    try:
        *parents, last = name.split("/")
        for part in parents:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(last, flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)


def read_checked(
    folder: pathlib.Path, name: str, *, owner: int, budget: int
) -> tuple[tuple[int, int], bytes]:
    """A folder file's (size, modification time in ns) and bytes, or `Refused`: not a
    regular file (symlinks, FIFOs, devices, sockets), a hard link (more than one name,
    so it may be a file from elsewhere), not `owner`'s (not the execution's own), or
    larger than the `budget` left of the call's total."""
    try:
        fd = _open_in(folder, name)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("a symbolic link: only regular files are uploaded") from None
        raise
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(file.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise Refused(f"{file_kind(found.st_mode)}: only regular files are uploaded")
        if found.st_nlink > 1:
            raise Refused(
                f"it has {found.st_nlink} hard links: a file linked from elsewhere is not uploaded"
            )
        if found.st_uid != owner:
            raise Refused(
                f"it belongs to uid {found.st_uid}, not to the execution's user ({owner})"
            )
        if found.st_size > budget:
            raise Refused(f"it would take the call's files past their {size_text(budget)} left")
        data = file.read(budget + 1)
        if len(data) > budget:
            raise Refused(f"it would take the call's files past their {size_text(budget)} left")
        return (found.st_size, found.st_mtime_ns), data


def _folder_files(
    folder: pathlib.Path, entries: Sequence[os.DirEntry[str]]
) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """The regular files under `folder` (subfolders walked, symlinks not followed), by
    name relative to it, with their (size, modification time in ns); and the entries
    that are not regular files, or could not be looked at, with why they are not
    uploaded (B4: every skipped file is said). `entries`: its top level. At most
    `MAX_FOLDER_ENTRIES` entries are looked at; the rest are said to be skipped."""
    found: dict[str, tuple[int, int]] = {}
    special: dict[str, str] = {}
    pending = [("", list(entries))]
    seen = 0
    while pending:
        prefix, level = pending.pop()
        for entry in level:
            seen += 1
            if seen > MAX_FOLDER_ENTRIES:
                special[prefix + entry.name] = (
                    f"the output folder has more than {MAX_FOLDER_ENTRIES} entries: "
                    "the rest were not looked at"
                )
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    with os.scandir(entry.path) as inner:
                        pending.append((f"{prefix}{entry.name}/", list(inner)))
                    continue
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed meanwhile: not there to upload
            except OSError as exc:
                special[prefix + entry.name] = f"it could not be read: {describe(exc)}"
                continue
            if stat.S_ISREG(info.st_mode):
                found[prefix + entry.name] = (info.st_size, info.st_mtime_ns)
            else:
                special[prefix + entry.name] = (
                    f"{file_kind(info.st_mode)}: only regular files are uploaded"
                )
    return found, special


async def upload_folder(ctx: ExecutionContext) -> dict[str, str]:
    """Upload the regular files left in the call's output folder (F4); those skipped,
    each with the reason.

    `result.json` (FUNCTION_RESULT_FILE) goes first. A file the handler uploaded itself
    (`ExecutionContext.upload_file`) that has not changed since is not sent again. Not
    uploaded, and said why (T8): what is not a regular file (a symlink, a FIFO, a device,
    a socket), a file with more than one hard link, one that does not belong to the
    execution's user (`ctx.file_owner`, else this process's), one past what is left of
    the call's total (`ctx.upload_limit_bytes`); each is opened with O_NOFOLLOW, every
    folder on the way too. A file the service refuses, or that cannot be read, is
    skipped and the rest are still uploaded (once the service cannot be reached, the
    rest are skipped saying so). Every skipped file is counted under its reason in one
    summary (B4, B10): a message (role `runner`) and a `files_skipped` event on the
    call, and one log line, with a few names per reason, bounded whatever the count.
    An empty folder costs one scandir.
    """
    folder = ctx.output_dir
    try:
        with os.scandir(folder) as entries:
            top = list(entries)
    except OSError:  # the handler removed its folder
        return {}
    if not top:
        return {}
    found, skipped = await asyncio.to_thread(_folder_files, folder, top)
    total = len(found) + len(skipped)
    result = ctx.result_file.name
    names = sorted(found, key=lambda name: (name != result, name))
    owner = os.geteuid() if ctx.file_owner is None else ctx.file_owner
    unavailable = ""  # the service's answer once it is down: the rest are not tried
    for name in names:
        if ctx._stats.get(name) == found[name]:
            continue  # uploaded as it is now
        reason = ""
        if unavailable:
            reason = unavailable
        elif len(ctx.uploaded) >= MAX_FILES_PER_CALL and name not in ctx.uploaded:
            reason = f"the call already has {MAX_FILES_PER_CALL} files, the most it can keep"
        elif not _is_utf8(name):
            reason = "its name is not valid UTF-8"
        else:
            used = sum(size for other, size in ctx.upload_sizes.items() if other != name)
            budget = max(0, ctx.upload_limit_bytes - used)
            try:
                stat_now, data = await asyncio.to_thread(
                    read_checked, folder, name, owner=owner, budget=budget
                )
                await ctx.upload_file(name, data)
                ctx._stats[name] = stat_now
            except Refused as refused:
                reason = str(refused)
            except errors.InvalidArgument as exc:
                reason = exc.message
            except (errors.Unavailable, errors.DeadlineExceeded) as exc:  # after retries
                reason = unavailable = f"the service could not be reached: {exc.message}"
            except errors.AgentWorksError as exc:  # refused: said, and the rest still go
                reason = f"the service refused it ({exc.code.name}): {exc.message}"
            except OSError as exc:  # removed or unreadable meanwhile
                reason = describe(exc)
        if reason:
            skipped[name] = reason
    if skipped:
        await _note_skipped(ctx, skipped, total)
    return skipped


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in the name (surrogate escapes)
        return False
    return True


def skipped_summary(skipped: Mapping[str, str], total: int) -> dict[str, Any]:
    """What was not uploaded, bounded whatever the count (B4, B10): how many of the
    folder's `total` files; per reason (most files first, at most `SUMMARY_REASONS`)
    its count and a few names (`SUMMARY_EXAMPLES`, sorted), each name and reason cut
    short; the files of the other reasons counted together."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped.items():
        by_reason.setdefault(reason, []).append(name)
    ranked = sorted(by_reason.items(), key=lambda item: -len(item[1]))
    reasons = [
        {
            "reason": _short(reason, SUMMARY_REASON_CHARS),
            "count": len(names),
            "examples": [_short(n, SUMMARY_NAME_CHARS) for n in sorted(names)[:SUMMARY_EXAMPLES]],
        }
        for reason, names in ranked[:SUMMARY_REASONS]
    ]
    others = ranked[SUMMARY_REASONS:]
    return {
        "skipped": len(skipped),
        "files": total,
        "reasons": reasons,
        "other_reasons": len(others),
        "other_files": sum(len(names) for _, names in others),
    }


def summary_text(summary: Mapping[str, Any]) -> str:
    """The summary as one sentence (the `runner` message)."""
    parts = []
    for group in summary["reasons"]:
        shown = ", ".join(repr(name) for name in group["examples"])
        more = group["count"] - len(group["examples"])
        parts.append(f"{shown}{f' and {more} more' if more else ''}: {group['reason']}")
    if summary["other_reasons"]:
        parts.append(f"{summary['other_files']} more for {summary['other_reasons']} other reasons")
    return (
        f"{summary['skipped']} of {summary['files']} files in the output folder were not "
        "uploaded: " + "; ".join(parts)
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


async def _note_skipped(ctx: ExecutionContext, skipped: dict[str, str], total: int) -> None:
    """Say on the call which files were not uploaded and why, in one report: a `runner`
    message and a `files_skipped` event (the summary as JSON), both bounded; and one
    log line (never one per file)."""
    summary = skipped_summary(skipped, total)
    ctx.log.warning(
        "execution.files_skipped",
        skipped=summary["skipped"],
        files=total,
        reasons={group["reason"]: group["count"] for group in summary["reasons"]},
        other_files=summary["other_files"],
    )
    text = fit_text(summary_text(summary), NOTE_BYTES)
    event = {"kind": SKIPPED_EVENT, "text": json.dumps(summary, ensure_ascii=False)}
    try:
        note = f.ExecutionMessage(role="runner", text=text)
        await ctx.report(messages=[note], events=[event])
    except errors.AgentWorksError as exc:  # e.g. the call's message limit: the log has it
        ctx.log.warning("execution.note_refused", code=exc.code.name, error=exc.message)


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
