"""Open event streams end when their token does (A1, G1, T4).

A request checks its token when it is made; an event stream is one request that lasts
for hours. `OpenTokens` keeps the tokens behind the replica's open streams and checks
them again every `GATEWAY_STREAM_RECHECK_SECONDS` (10), all of them in one statement
however many streams are open (an idle stream costs no statement of its own, N5). A
token found revoked, expired or gone sets the `ended` event of each of its streams,
with the refusal a new request would get; `sse.EventStream` then sends it as
`event: error` and closes the stream. Before an event is sent its stream's token is
checked too (one statement per event, as a read's), so nothing is delivered after a
revocation; heartbeats are not checked one by one. `respond` does the same for an
ASGI answer that may stay open (an MCP `subscriptions/listen`): each chunk but a
comment is checked before it leaves, and the token's end cancels the answer and sends
the protocol's own refusal as its last chunk. An A2A stream's first event, the task
the request answers at once, is covered by the request's own token check, as any
request's answer is (`first_is_answer`); every later event is checked.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentworks.core import errors
from agentworks_gateway.models import TokenRecord
from agentworks_gateway.store import TokenStore

log = structlog.get_logger("agentworks.gateway")


@dataclass(eq=False)  # each hold is itself (hashed by identity)
class Held:
    """One open stream's hold on its token: `ended` is set, with `refusal`, when the
    token no longer lets its holder in."""

    token_id: str
    tokens: OpenTokens
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    refusal: errors.AgentWorksError | None = None

    async def verify(self) -> None:
        """Check the token now (before an event is sent: no event leaves after a
        revocation, as no read answers after one); end the stream if it no longer
        lets in."""
        if not self.ended.is_set():
            await self.tokens.recheck([self.token_id])
        if self.ended.is_set():
            raise self.refusal or errors.Unauthenticated("the stream's token no longer lets in")


class OpenTokens:
    """The tokens of the replica's open streams, checked again together."""

    def __init__(
        self,
        tokens: TokenStore,
        check: Callable[[TokenRecord], object],
        interval: float,
    ) -> None:
        self.tokens = tokens
        self.check = check  # raises Unauthenticated for a token that no longer lets in
        self.interval = interval
        self._held: dict[str, set[Held]] = {}
        self._loop: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def hold(self, token_id: str) -> Iterator[Held]:
        """Follow `token_id` while the stream is open."""
        held = Held(token_id, self)
        self._held.setdefault(token_id, set()).add(held)
        if self._loop is None or self._loop.done():
            self._loop = asyncio.get_running_loop().create_task(self._recheck())
        try:
            yield held
        finally:
            holders = self._held.get(token_id, set())
            holders.discard(held)
            if not holders:
                self._held.pop(token_id, None)

    async def _recheck(self) -> None:
        while self._held:
            await asyncio.sleep(self.interval)
            try:
                await self.recheck()
            except errors.AgentWorksError as exc:  # the database away: try again later
                log.warning("stream.recheck_failed", code=exc.code.name, message=exc.message)

    async def recheck(self, ids: list[str] | None = None) -> None:
        """Check every held token (or these) once; end the streams of those that no
        longer let in."""
        ids = list(self._held) if ids is None else ids
        if not ids:
            return
        found = {record.token_id: record for record in await self.tokens.by_ids(ids)}
        for token_id in ids:
            refusal = self._refusal(found.get(token_id), token_id)
            if refusal is None:
                continue
            for held in list(self._held.get(token_id, ())):
                held.refusal = refusal
                held.ended.set()
            log.info("stream.token_ended", token_id=token_id, reason=refusal.reason)

    def _refusal(self, record: TokenRecord | None, token_id: str) -> errors.AgentWorksError | None:
        if record is None:
            return errors.Unauthenticated(
                f"API token {token_id} no longer exists: use another token",
                reason=errors.Reason.CREDENTIALS_INVALID,
                metadata={"credential": "API token", "token_id": token_id},
            )
        try:
            self.check(record)
        except errors.AgentWorksError as exc:
            return exc
        return None


# A chunk a stream sends that carries no event (an SSE comment: a ping, a heartbeat):
# sent without a check of its own.
_COMMENT = b":"


async def respond(
    held: Held,
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    final: Callable[[errors.AgentWorksError], bytes],
    *,
    first_is_answer: bool = False,
) -> None:
    """Run the ASGI `app` (a response that may stay open for long: an MCP
    `subscriptions/listen`) while `held`'s token lets in (A1). Each chunk but a comment
    is sent only after the token is checked again; once the token no longer lets in,
    `app` is cancelled and, its answer started, `final(refusal)` is its last chunk.
    With `first_is_answer` (the app's first event is the request's own answer, made at
    once: an A2A stream's task), that one is covered by the request's token check, as
    any request's answer is. Raises the refusal when nothing was sent yet (the caller
    answers it)."""
    started = finished = False
    unchecked = 1 if first_is_answer else 0

    async def checked(message: Message) -> None:
        nonlocal started, finished, unchecked
        if message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body and not body.startswith(_COMMENT):
                if unchecked:
                    unchecked -= 1
                else:
                    try:
                        await held.verify()
                    except errors.AgentWorksError:
                        await asyncio.Event().wait()  # never sent: the token's end cancels us
            finished = not message.get("more_body", False)
        await send(message)
        started = True

    answer = asyncio.ensure_future(app(scope, receive, checked))
    ended = asyncio.ensure_future(held.ended.wait())
    try:
        await asyncio.wait({answer, ended}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not answer.done():
            answer.cancel()
        await asyncio.gather(answer, ended, return_exceptions=True)
    if not held.ended.is_set() or not answer.cancelled():
        answer.result()  # the answer ended first: its exception, if any, is the caller's
        return
    refusal = held.refusal or errors.Unauthenticated("the token no longer lets in")
    log.info("stream.ended", reason=refusal.reason, token_id=held.token_id)
    if not started:
        raise refusal
    if not finished:
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": final(refusal), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
