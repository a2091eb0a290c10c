"""The functions service's limits and the checks its use cases share (F1-F15, P6)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import structlog

from agentworks.client.functions import START_RECEIPT_NOTE
from agentworks.core.checks import check_no_nul
from agentworks.core.errors import InvalidArgument, NotFound, PermissionDenied
from agentworks.core.identity import Identity
from agentworks.core.limits import (
    MAX_EXECUTION_MESSAGE_BYTES,
    MAX_FILE_NAME_BYTES,
)
from agentworks_functions.models import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    Call,
    Ending,
    Notice,
    NoticeOutcome,
    TargetKey,
)

log = structlog.get_logger("agentworks.functions")


MAX_MESSAGE_BYTES = MAX_EXECUTION_MESSAGE_BYTES


# Past the file limit, up to this much more of the upload is read and dropped before the
# refusal goes out: a grpc.aio client still writing when the status arrives reports
# INTERNAL "Internal error from Core" instead of it (grpc/grpc#36066).
MAX_UPLOAD_DRAIN_BYTES = 64 * 1024 * 1024


# A page's size when the request leaves it 0; the ranges are the protos' rules
# (GetStatusRequest, ReadFileRequest), checked before the handler.
MESSAGE_LIMIT_DEFAULT = 50
EVENT_LIMIT_DEFAULT = 50
READ_LIMIT_DEFAULT = 64 * 1024


# The pages (after, message_limit, after_event, event_limit) of a Call's `outcome`.
_OUTCOME = (-1, 1, -1, 1)

LEASE_DEFAULT = 30


def sees_call(identity: Identity, caller: str, owner: str) -> bool:
    """A3: a call is seen by its caller, its target's owner and the operator, who lists
    every call (V1) and must be able to look at a stuck one and cancel it. Answering its
    question and reading its files stay the caller's and the owner's (`_check_reader`)."""
    return identity.principal in (caller, owner) or identity.is_operator


# Tool events keep the tool name only: raw arguments and results are never stored (F7).
TOOL_EVENT_KINDS = ("tool_call", "tool_result")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

_FUNCTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")

_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")

# Sends completion notices in one request; what became of each, in their order.
NoticeSender = Callable[[list[Notice]], Awaitable[list[NoticeOutcome]]]


def check_size(value: str, field: str, limit: int) -> str:
    """No NUL, at most `limit` bytes of UTF-8: for a field no proto rule states a size of
    (a report's items, which the validator does not walk; a function's description)."""
    check_no_nul(value, field)
    size = len(value.encode())
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; the limit is {limit} bytes")
    return value


def function_not_found(target: TargetKey, function: str) -> NotFound:
    """The same answer for a function that does not exist and one the caller may not call
    (F2), saying where to see the ones it may: the CLI, the MCP tool and the RPC."""
    if target.kind == "crew":
        cli, mcp = f"agentworks crews functions {target.name}", f"crew={target.name}"
    else:
        cli = f"agentworks functions list --workflow {target.name}"
        mcp = f"workflow_id={target.name}"
    return NotFound(
        f"function {function!r} not found on {target} (or you may not call it); see the "
        f"functions you may call: `{cli}` (CLI), the `functions` tool with action=list, "
        f"{mcp} (MCP), or ListFunctions (gRPC)"
    )


def check_file_name(name: str, call_id: str) -> str:
    """A path inside the call's output folder; anything that could escape it is refused."""
    prefix = f".calls/{call_id}/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    if not name:
        raise InvalidArgument("file is required: a path inside the output folder, e.g. result.json")
    if len(name.encode()) > MAX_FILE_NAME_BYTES:
        raise InvalidArgument(f"file name is longer than {MAX_FILE_NAME_BYTES} bytes")
    parts = name.split("/")
    if (
        name.startswith("/")
        or "\\" in name
        or _CONTROL_RE.search(name)
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise InvalidArgument(
            f"file {name!r} is not a path inside the call's output folder: use a relative "
            "path such as report.csv or out/data.json, without '..', '.', empty parts, a "
            "leading '/' or backslashes"
        )
    return name


def text_page(data: bytes, *, more: bool) -> tuple[str | None, bytes]:
    """The page as text (trimmed to a whole UTF-8 character), or None if it is not text."""
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        pass
    if more:
        for cut in (1, 2, 3):
            trimmed = data[:-cut]
            if not trimmed:
                break
            try:
                return trimmed.decode("utf-8"), trimmed
            except UnicodeDecodeError:
                continue
    return None, data


def start_receipt(call: Call) -> bool:
    """Whether the call ended with a start receipt: a function declared to start work
    that completed (F9, L7); the work itself is not finished by it."""
    return call.starts_work and call.status == COMPLETED


def notice_text(call: Call) -> str:
    """The completion notice: a reference to the saved terminal output, no verdict (F13);
    a start receipt says so (L7). It is read by the turn it starts, so it names the
    model's tool that reads the call (get_function_call, L9), not a command."""
    ended = f"{call.status} ({START_RECEIPT_NOTE})" if start_receipt(call) else call.status
    return (
        f"Function call {call.id} ({call.target} {call.function}) ended: {ended}. "
        f"Its saved output (answer, result, error and files in {call.output_folder}) is "
        f"readable with the get_function_call tool, call_id {call.id}."
    )


async def _drain(chunks: AsyncIterator[tuple[str, str, str, bytes]], limit: int) -> None:
    """Read and drop the rest of an upload, at most `limit` bytes of it."""
    dropped = 0
    async for _, _, _, data in chunks:
        dropped += len(data)
        if dropped > limit:
            return


@dataclasses.dataclass
class _ClaimGate:
    """The claims of one target set in this process: they take turns (see _claim_once)."""

    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    empty_since: float = float("-inf")  # start of the latest attempt that found nothing
    users: int = 0


def check_claim_targets(identity: Identity, targets: Sequence[TargetKey]) -> None:
    """The targets of a claim are all served by this runtime (R1). How many (1 to
    limits.MAX_CLAIM_TARGETS) is the proto's rule (ClaimExecutionRequest.targets, also as
    a finish's claim_next), checked before the handler."""
    for key in targets:
        if not identity.serves(key.kind, key.name):
            raise PermissionDenied(f"{identity.principal} may not run executions of {key}")


def plain_ending(
    failed: bool, final_message: str, error: str, *, interrupted: bool = False
) -> Ending:
    """A finish with no result to check: completed with its answer, failed, or given up
    by its runtime (interrupted, F12)."""
    if interrupted:
        return Ending(
            INTERRUPTED,
            answer=final_message,
            error=error or "the execution's runtime gave it up before it ended",
        )
    if failed:
        return Ending(
            FAILED,
            answer=final_message,
            error=error or "the execution reported a failure without details",
        )
    return Ending(COMPLETED, answer=final_message)


def same_finish(
    call: Call, *, failed: bool, final_message: str, error: str, correction_round: int
) -> bool:
    """Whether a finish of an ended call repeats the one that ended it (a retry after a
    lost answer): the same final message; a failure with the same error; a success that
    completed the call, or that the result check failed after the correction turn."""
    if final_message != call.answer:
        return False
    if failed:
        return call.status == FAILED and plain_ending(True, final_message, error).error == (
            call.error
        )
    return call.status == COMPLETED or correction_round == 1
