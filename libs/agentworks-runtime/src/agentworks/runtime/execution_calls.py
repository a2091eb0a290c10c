"""An execution's function calls (F14, L8): list, call (with retry ids scoped to the
call, or to a workflow step's run, step and group), follow and answer them. Mixed into
`ExecutionContext`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentworks.client.functions import FunctionsClient
from agentworks.common.v1 import common_pb2
from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.lease import Backoff

_TRANSIENT = (errors.Unavailable, errors.DeadlineExceeded)


class FunctionCalls:
    """`ExecutionContext`'s function-call methods, on the execution's own client."""

    execution: f.Execution
    client: FunctionsClient
    log: Any

    if TYPE_CHECKING:

        @property
        def call_id(self) -> str: ...

        @property
        def run_id(self) -> str: ...

    async def list_functions(self, target: str) -> list[f.Function]:
        """The functions this runtime's principal may call on `target` (F2)."""
        return await self._calling(lambda: self.client.list_functions(target))

    async def call_function(
        self,
        target: str,
        function: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        step: str = "",
        group: str = "",
        submission_id: str | None = None,
        wait_seconds: int = 0,
    ) -> f.CallReceipt:
        """Call a declared function from this execution; keep `receipt.call_id` (F14, L8).

        In a workflow function's execution (a workflow agent step) `step` is required:
        the call identifies the source workflow (the caller is this runtime's
        `workflow:<id>`) and its run, step and group (`source`), and the retry id is
        scoped to them. The default retry id is `<target>/<function>`, so a retried step
        (same run, step and group) gets the call it made before, never a second one; a
        step calling one function more than once gives each call its own
        `submission_id` (or group). In a crew's execution the retry id is scoped to this
        call (and `step`, if given). There is no completion notice: poll with
        `get_function_call` (or `wait_seconds`, up to 25, for a quick one).
        """
        key = submission_id or f"{target}/{function}"
        source: dict[str, str] | None = None
        if self.execution.target.kind == common_pb2.TARGET_KIND_WORKFLOW:
            if not step:
                raise errors.InvalidArgument(
                    "step is required for a call from a workflow step (the step making "
                    "the call): retry ids are scoped to run, step and group"
                )
            source = {"run_id": self.run_id or self.call_id, "step": step, "group": group}
        else:
            key = f"call:{self.call_id}:{step}/{group}:{key}"
        receipt = await self._calling(
            lambda: self.client.call(
                target,
                function,
                inputs,
                submission_id=key,
                source=source,
                wait_seconds=wait_seconds,
            )
        )
        self.log.info(
            "function.called",
            call_id=receipt.call_id,
            function=f"{target}/{function}",
            created=receipt.created,
        )
        return receipt

    async def get_function_call(
        self, call_id: str, *, after: int = -1, message_limit: int = 0, wait_seconds: int = 0
    ) -> f.CallStatus:
        """A call's status, progress, question, answer/result, error and files, with its
        execution messages after the `after` cursor (F7); `wait_seconds` (up to 25)
        waits for a change of an open call."""
        return await self._calling(
            lambda: self.client.get_status(
                call_id, after=after, message_limit=message_limit, wait_seconds=wait_seconds
            )
        )

    async def reply_function_call(self, call_id: str, text: str) -> f.CallStatus:
        """Answer the human-input question a call is `waiting_for_input` on (F11)."""
        return await self._calling(lambda: self.client.reply(call_id, text))

    async def _calling(self, make: Callable[[], Awaitable[Any]], attempts: int = 3) -> Any:
        """`make()` on another call (its errors are its own, not this execution's lease),
        retried on UNAVAILABLE / DEADLINE_EXCEEDED (each request carries its retry key)."""
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, attempts + 1):
            try:
                return await make()
            except _TRANSIENT as exc:
                if attempt == attempts:
                    raise
                delay = backoff.next()
                self.log.warning("function.retry", error=exc.message, retry_in=round(delay, 2))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")
