"""Request bodies at the gateway's HTTP surface (B1, B5, B6, B10): read as they stream
in, bounded in bytes (413 past `GATEWAY_MAX_BODY_BYTES`, as soon as it is passed) and in
time (408 past `GATEWAY_BODY_TIMEOUT_SECONDS`), then parsed as JSON with integers of at
most `MAX_INTEGER_DIGITS` digits."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from agentworks.core import errors

# Bodies larger than this are parsed one at a time (`LargeBodies`).
LARGE_BODY_BYTES = 64 * 1024

T = TypeVar("T")


class LargeBodies:
    """Work on large bodies (parsing them, the size rules), one at a time per process
    (B1, B5). Parsing holds the serving loop (8-30 ms per 0.75 MB, by machine): with
    several at once another user's request would wait for all of them. The cyclic
    collector is paused meanwhile: tens of thousands of new containers would otherwise
    start collections that move them into the old generations, and then full
    collections of the whole process (each far longer than the parse); what the work
    made and dropped, and a refusal's frames, are freed by their counts before it
    resumes. After each, the next waits as long as that one held the loop: large bodies
    take at most half of it, so a request of another user that crosses the loop several
    times (its token look-up, the service's answer) is not behind a parse at every step."""

    def __init__(self) -> None:
        self._turn = asyncio.Semaphore(1)

    async def run(self, work: Callable[[], T]) -> T:
        """`work()`'s result; its AgentWorksError is raised once the collector is back."""
        async with self._turn:
            await asyncio.sleep(0)  # what is ready to run goes first
            collecting = gc.isenabled()
            gc.disable()
            refusal: errors.AgentWorksError | None = None
            started = time.monotonic()
            try:
                result = work()
            except errors.AgentWorksError as exc:
                refusal = exc.with_traceback(None)  # its frames (and what they hold) go
            finally:
                if collecting:
                    gc.enable()
            await asyncio.sleep(time.monotonic() - started)  # the loop's other half
        if refusal is not None:
            raise refusal
        return result


class BodyTooLarge(errors.InvalidArgument):
    """A request body past the limit (answered 413, as soon as the limit is passed)."""

    def __init__(self, limit: int, what: str = "request body") -> None:
        super().__init__(
            f"{what} passes the limit: the limit is {limit} bytes (GATEWAY_MAX_BODY_BYTES); "
            "send smaller arguments",
            reason=errors.Reason.REQUEST_LIMIT,
            metadata={"limit": str(limit), "setting": "GATEWAY_MAX_BODY_BYTES"},
        )


class RequestTimeout(errors.DeadlineExceeded):
    """A request body stalled (answered 408, not 504: the client is the slow side)."""


def check_declared_size(declared: str, limit: int) -> None:
    """BodyTooLarge when the request's Content-Length says it passes `limit`: refused
    before a byte of it is read."""
    if declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)


async def bounded_body(request: Request, limit: int, seconds: float = 30.0) -> bytes:
    """The raw body, or BodyTooLarge as soon as it passes `limit` bytes (never all read);
    RequestTimeout when it has not all arrived within `seconds` (B6: a body dripping
    one byte at a time holds a connection no longer than one that stops)."""
    check_declared_size(request.headers.get("content-length", ""), limit)
    body = bytearray()
    chunks = aiter(request.stream())
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            if left <= 0:
                raise TimeoutError
            chunk = await asyncio.wait_for(anext(chunks), left)
        except StopAsyncIteration:
            return bytes(body)
        except TimeoutError:
            got = f"{len(body)} bytes of it came" if body else "no byte of it came"
            raise RequestTimeout(
                f"the request body did not arrive within {seconds:g} s ({got}; "
                "GATEWAY_BODY_TIMEOUT_SECONDS): send it whole",
                reason=errors.Reason.REQUEST_TIMEOUT,
                metadata={"limit": f"{seconds:g}", "setting": "GATEWAY_BODY_TIMEOUT_SECONDS"},
            ) from None
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)


def parse_arguments(body: bytes) -> Any:
    """A request body's JSON, or InvalidArgument saying why it is none. Integers of more
    than `MAX_INTEGER_DIGITS` digits are refused naming where they are (B10)."""
    try:
        return json.loads(body or b"{}")
    except RecursionError:  # nested past what the parser follows
        raise errors.InvalidArgument(
            "request body nests objects and arrays too deep to read: the arguments may "
            "nest at most 24 deep",
            reason=errors.Reason.REQUEST_LIMIT,
            metadata={"limit": "24"},
        ) from None
    except ValueError as exc:
        # Python refuses an integer past its digits limit with a ValueError too: which
        # one it was is found by parsing again, never by reading the exception's words.
        refusal = _long_integer(body)
        if refusal is not None:
            raise refusal from None
        raise errors.InvalidArgument(
            f"request body is not JSON ({exc}): send the tool's arguments as a JSON object",
            reason=errors.Reason.MALFORMED,
        ) from None


# JSON numbers (B10): integers of up to this many digits (Python's own bound on turning
# text into an int, whose cost grows with the square of the length); longer ones are
# refused, naming the argument. Numbers with a fraction or exponent are IEEE doubles.
MAX_INTEGER_DIGITS = 4300


class _LongInteger:
    def __init__(self, digits: int) -> None:
        self.digits = digits


def _long_integer(body: bytes) -> errors.InvalidArgument | None:
    """The refusal of a body with an integer of more than MAX_INTEGER_DIGITS digits,
    naming where it is (parsed again, keeping such integers as their length); None when
    it has none (or is not JSON)."""

    def number(text: str) -> Any:
        digits = len(text.lstrip("-"))
        return _LongInteger(digits) if digits > MAX_INTEGER_DIGITS else int(text)

    where, digits = "the arguments", 0
    try:
        value = json.loads(body, parse_int=number)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _LongInteger):
            where, digits = path or "the arguments", item.digits
            break
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(item))
    if not digits:
        return None
    return errors.InvalidArgument(
        f"{where} holds an integer of {digits} digits: integers in arguments may have at "
        f"most {MAX_INTEGER_DIGITS} digits; send a longer number as a string",
        reason=errors.Reason.REQUEST_LIMIT,
        metadata={"field": where, "limit": str(MAX_INTEGER_DIGITS)},
    )
