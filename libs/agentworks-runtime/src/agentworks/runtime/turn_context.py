"""What a turn handler gets: deliveries, the reply, wake-ups, function calls (R1, C6)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient, target_str
from agentworks.client.a2a_out import a2a_request
from agentworks.client.messaging import attributes_json
from agentworks.common.v1 import common_pb2
from agentworks.core import errors
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.lease import Backoff
from agentworks.runtime.turn_wake_ups import WakeUps
from agentworks.scheduler.v1 import scheduler_pb2 as s

T = TypeVar("T")

DELIVERY_KINDS: dict[int, str] = {
    m.DELIVERY_KIND_MESSAGE: "message",
    m.DELIVERY_KIND_WAKE_UP: "wake_up",
    m.DELIVERY_KIND_SCHEDULE: "schedule",
    m.DELIVERY_KIND_WEBHOOK: "webhook",
    m.DELIVERY_KIND_FUNCTION_COMPLETED: "function_completed",
    m.DELIVERY_KIND_CONVERSATION_REPLY: "conversation_reply",
}

# Errors that mean the configuration is wrong; retrying cannot help.
_FATAL = (errors.Unauthenticated, errors.InvalidArgument)

# Errors worth retrying quickly: the service or the network is briefly away.
_TRANSIENT = (errors.Unavailable, errors.DeadlineExceeded)


def delivery_kind(delivery: m.Delivery) -> str:
    """The contract name of a delivery's kind: message, wake_up, schedule, webhook, ..."""
    return DELIVERY_KINDS.get(delivery.kind, "unknown")


def delivery_attributes(delivery: m.Delivery) -> dict[str, Any]:
    """A delivery's attributes as JSON: a schedule's `{"schedule_id": ...,
    "occurrence": ..., "missed_occurrences": 2, ...}`, a webhook's `{"webhook_id": ...,
    "content_type": ..., "signed_at": 1764554400, ...}` (the table in docs/scheduler.md)."""
    return attributes_json(delivery)


@dataclass
class TurnContext(WakeUps):
    """What a handler gets for one turn: its deliveries and the explicit reply tool;
    its conversation's wake-ups (`WakeUps`), function calls."""

    turn: m.Turn
    client: MessagingClient
    log: Any
    lease_lost: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[m.SendReceipt] = field(default_factory=list)
    # Set when the worker has a scheduler address; acts as the runtime's agent identity.
    scheduler: SchedulerClient | None = None
    wake_ups: list[s.WakeUp] = field(default_factory=list)
    # Set when the worker has a functions address; acts as the runtime's agent identity.
    functions: FunctionsClient | None = None
    function_calls: list[f.CallReceipt] = field(default_factory=list)
    started: list[m.SendReceipt] = field(default_factory=list)  # start/continue_conversation
    _capability: str = field(default="", repr=False)  # renewed by the heartbeats (T3)
    ended: bool = False  # a reply completed the turn (send_message(end_turn=True))
    # The gateway (AGENTWORKS_GATEWAY_URL): external A2A agents are reached through it (X4).
    gateway_url: str = ""
    a2a_requests: int = 0
    # Why the handler failed, when it knows more than its exception says (a turn
    # command's stderr tail): sent with CompleteTurn for the target's owner (L12).
    error_detail: str = ""

    @property
    def turn_id(self) -> str:
        """The claimed turn's id."""
        return self.turn.turn_id

    @property
    def capability(self) -> str:
        """The turn's current capability (T3): an identity that allows this turn's own
        operations only (its reply inbox, its transcript, its heartbeat and completion,
        wake-ups of its conversation, function calls notified into it), until the
        lease ends; "" when messaging issued none. Hand it, not the runtime's identity,
        to a process acting in the turn."""
        return self._capability or self.turn.capability

    @property
    def conversation_id(self) -> str:
        """The conversation this turn belongs to."""
        return self.turn.conversation_id

    @property
    def target(self) -> str:
        """The crew or workflow served, as `crew:<name>` / `workflow:<id>`."""
        return target_str(self.turn.target)

    @property
    def reply_inbox_id(self) -> str:
        """The trusted reply address: the conversation's inbox (C6)."""
        return self.turn.reply_inbox_id

    @property
    def deliveries(self) -> list[m.Delivery]:
        """The deliveries in this turn, oldest first."""
        return list(self.turn.deliveries)

    @property
    def messages(self) -> list[m.Message]:
        """The messages among the deliveries, oldest first."""
        return [d.message for d in self.turn.deliveries if d.kind == m.DELIVERY_KIND_MESSAGE]

    async def send_message(
        self,
        text: str,
        *,
        parts: Sequence[common_pb2.Part] = (),
        attempts: int = 3,
        end_turn: bool = False,
    ) -> m.SendReceipt:
        """Send `text` as this agent to the conversation's inbox (the only reply path, C6).

        With `end_turn`, the reply also completes the turn in the same request (one
        request instead of two); the worker then does not complete it again, and the
        turn's other operations end with it. Retries on UNAVAILABLE with a per-turn
        submission id, so a retry never sends the message twice (C4).
        """
        submission_id = f"turn:{self.turn_id}:{len(self.sent) + 1}"
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, attempts + 1):
            try:
                receipt = await self.client.send_message(
                    self.reply_inbox_id,
                    text,
                    parts=parts,
                    submission_id=submission_id,
                    complete_turn_id=self.turn_id if end_turn else "",
                )
            except _TRANSIENT as exc:
                if attempt == attempts:
                    raise
                delay = backoff.next()
                self.log.warning("reply.retry", error=exc.message, retry_in=round(delay, 2))
                await asyncio.sleep(delay)
                continue
            self.sent.append(receipt)
            self.ended = self.ended or end_turn
            self.log.info("reply.sent", message_id=receipt.message_id, ended_turn=end_turn)
            return receipt
        raise AssertionError("unreachable")

    async def start_conversation(
        self, target: str, text: str, *, parts: Sequence[common_pb2.Part] = ()
    ) -> m.SendReceipt:
        """Start a conversation with another crew or workflow (`crew:<name>`,
        `workflow:<id>`) as this agent, tied to this conversation (L5).

        The other side's messages come back as later turns of THIS conversation, as
        `conversation_reply` deliveries: the delivery's `message` is what they sent, its
        attributes name their `conversation_id`, `inbox_id`, `target` and `sender`.
        Continue it with `continue_conversation(inbox_id, ...)`. Keep the receipt's
        `inbox_id`. Authorised by the turn's capability; retried on UNAVAILABLE with a
        per-turn retry key, so a retry never starts a second conversation (C4). Raises
        `PreconditionFailed` when the target has agent messaging off (C8).
        """
        return await self._from_turn(text, parts, target=target)

    async def continue_conversation(
        self, inbox_id: str, text: str, *, parts: Sequence[common_pb2.Part] = ()
    ) -> m.SendReceipt:
        """Send `text` into a conversation this conversation started (its `inbox_id`,
        from `start_conversation` or a `conversation_reply` delivery's attributes, L5)."""
        return await self._from_turn(text, parts, inbox_id=inbox_id)

    async def _from_turn(
        self, text: str, parts: Sequence[common_pb2.Part], **destination: str
    ) -> m.SendReceipt:
        if not self.capability:
            raise errors.PreconditionFailed(
                "this turn has no capability (the messaging service has no signing key), "
                "and conversations with other targets are started with it"
            )
        client = MessagingClient(
            channel=self.client.channel,
            identity=CapabilityIdentity(self.capability),
            timeout=self.client.timeout,
        )
        submission_id = f"turn:{self.turn_id}:converse:{len(self.started) + 1}"
        receipt = await self._retried(
            "conversation.retry",
            lambda: client.send_from_turn(
                text, parts=parts, submission_id=submission_id, **destination
            ),
        )
        self.started.append(receipt)
        self.log.info(
            "conversation.sent",
            conversation_id=receipt.conversation_id,
            message_id=receipt.message_id,
        )
        return receipt

    async def a2a(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        """`send` or `call` an external A2A agent on the operator's allow-list through
        the gateway, with this turn's capability (X4); its replies and a call's end come
        back as later `conversation_reply` / `function_completed` turns. The gateway holds
        the agent's credential: nothing here sees it."""
        if not self.gateway_url or not self.capability:
            raise errors.PreconditionFailed(
                "external A2A agents are reached through the gateway with the turn's "
                "capability: set AGENTWORKS_GATEWAY_URL for this runtime"
            )
        self.a2a_requests += 1
        key = f"turn:{self.turn_id}:a2a:{self.a2a_requests}"
        answer = await a2a_request(
            self.gateway_url, self.capability, action, {**body, "submission_id": key}
        )
        self.log.info("a2a.sent", action=action, agent=answer.get("agent"))
        return answer

    async def transcript(
        self, *, after: str = "", limit: int = 0, newest: bool = False
    ) -> m.GetTranscriptResponse:
        """A page of this conversation's transcript, oldest first: messages both ways
        and delivery records with their status (`interrupted` ones are not resent, C11),
        paged by `after=next_cursor` (C12); with `newest`, its newest `limit` entries
        (1-200), in one request however long the conversation."""
        return await self.client.get_transcript(
            self.conversation_id, after=after, limit=limit, newest=newest
        )

    async def _retried(self, event: str, make: Callable[[], Awaitable[T]]) -> T:
        """`make()`, tried 3 times on UNAVAILABLE / DEADLINE_EXCEEDED (the request carries
        its retry key, so a retry after a lost answer gets the same result)."""
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, 4):
            try:
                return await make()
            except _TRANSIENT as exc:
                if attempt == 3:
                    raise
                pause = backoff.next()
                self.log.warning(event, error=exc.message, retry_in=round(pause, 2))
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    def _functions_client(self) -> FunctionsClient:
        if self.functions is None:
            raise errors.PreconditionFailed(
                "this runtime has no functions service: set AGENTWORKS_FUNCTIONS_ADDRESS "
                "(or --functions-address) to call functions"
            )
        return self.functions

    async def list_functions(self, target: str) -> list[f.Function]:
        """The functions this agent may call on `target`, e.g. `crew:tools` (F2)."""
        return await self._functions_client().list_functions(target)

    async def call_function(
        self,
        target: str,
        function: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        submission_id: str | None = None,
        wait_seconds: int = 0,
    ) -> f.CallReceipt:
        """Call a declared function as this agent; keep `receipt.call_id` (F3-F6, F13).

        The completion notice is delivered to this conversation: the call's end comes
        back as a later `function_completed` turn whose attributes name the `call_id`
        and `status` (read the output with `get_function_call`). With `wait_seconds`
        (up to 25) the receipt carries the ended call as `outcome` if it ends in time.

        Retried on UNAVAILABLE with one retry key, `submission_id` or, by default, one
        per turn and call (`turn:<turn_id>:call:<n>`), so a retry after a lost answer
        gets the same call, never a second (F6). Raises `PreconditionFailed` when the
        runtime has no functions address (AGENTWORKS_FUNCTIONS_ADDRESS), and the
        service's errors (`InvalidArgument` for bad inputs, `Busy` at the running limit).

        Sent with the turn's capability: only it may ask for a notice, and only into its
        own conversation (L6).
        """
        functions = self._functions_client()
        if self.capability:
            functions = FunctionsClient(
                channel=functions.channel,
                identity=CapabilityIdentity(self.capability),
                timeout=functions.timeout,
            )
        key = submission_id or f"turn:{self.turn_id}:call:{len(self.function_calls) + 1}"
        receipt = await self._retried(
            "function.retry",
            lambda: functions.call(
                target,
                function,
                inputs,
                submission_id=key,
                notify_conversation_id=self.conversation_id,
                wait_seconds=wait_seconds,
            ),
        )
        self.function_calls.append(receipt)
        self.log.info(
            "function.called",
            call_id=receipt.call_id,
            function=f"{target}/{function}",
            created=receipt.created,
        )
        return receipt

    async def get_function_call(
        self, call_id: str, *, after: int = -1, message_limit: int = 0
    ) -> f.CallStatus:
        """A call's status, progress, question, answer/result, error and files, with its
        execution messages after the `after` cursor (F7)."""
        return await self._functions_client().get_status(
            call_id, after=after, message_limit=message_limit
        )

    async def reply_function_call(self, call_id: str, text: str) -> f.CallStatus:
        """Answer the human-input question a call is `waiting_for_input` on (F11)."""
        return await self._functions_client().reply(call_id, text)


TurnHandler = Callable[[TurnContext], Awaitable[object]]


@dataclass(frozen=True)
class TurnOutcome:
    """How one turn ended, for callers that watch the worker (tests, metrics)."""

    turn_id: str
    conversation_id: str
    completed: bool
    lease_lost: bool
    error: BaseException | None = None
