"""The execution protocol's side of the functions client (R1): what a runtime calls to
claim an execution, keep its lease, report, upload files, ask for input and finish.
`FunctionsClient` (`agentworks.client.functions`) has these methods too."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import grpc

from agentworks.client.common import LONG_POLL_SLACK_SECONDS, target_ref
from agentworks.client.rpc import ServiceClient
from agentworks.core import errors
from agentworks.core.limits import UPLOAD_CHUNK_BYTES
from agentworks.functions.v1 import functions_pb2 as f


def _event(event: Mapping[str, Any] | f.ExecutionEvent) -> f.ExecutionEvent:
    if isinstance(event, f.ExecutionEvent):
        return event
    return f.ExecutionEvent(
        kind=event.get("kind", ""), text=event.get("text", ""), tool_name=event.get("tool_name", "")
    )


def _step(step: Mapping[str, Any] | f.WorkflowStep) -> f.WorkflowStep:
    if isinstance(step, f.WorkflowStep):
        return step
    return f.WorkflowStep(
        step=step.get("step", ""),
        group=step.get("group", ""),
        status=step.get("status", ""),
        detail=step.get("detail", ""),
    )


class ExecutionCalls(ServiceClient):
    """The runtime's calls of `agentworks.functions.v1.FunctionsService` (R1)."""

    async def claim_execution(
        self, targets: Iterable[str], *, wait_seconds: int = 0, lease_seconds: int = 0
    ) -> f.Execution | None:
        response = await self._unary(
            "ClaimExecution",
            f.ClaimExecutionRequest(
                targets=[target_ref(t) for t in targets],
                wait_seconds=wait_seconds,
                lease_seconds=lease_seconds,
            ),
            timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS),
        )
        return response.execution if response.HasField("execution") else None

    async def heartbeat_execution(
        self, call_id: str, *, lease_seconds: int = 0
    ) -> f.HeartbeatExecutionResponse:
        return await self._unary(
            "HeartbeatExecution",
            f.HeartbeatExecutionRequest(call_id=call_id, lease_seconds=lease_seconds),
        )

    async def report(
        self,
        call_id: str,
        *,
        progress: str | None = None,
        messages: Iterable[str | f.ExecutionMessage] = (),
        events: Iterable[Mapping[str, Any] | f.ExecutionEvent] = (),
        steps: Iterable[Mapping[str, Any] | f.WorkflowStep] = (),
        sequence: int = 0,
    ) -> f.ReportResponse:
        """Report progress, execution messages, conversation events and workflow steps."""
        request = f.ReportRequest(
            call_id=call_id,
            messages=[
                m if isinstance(m, f.ExecutionMessage) else f.ExecutionMessage(text=m)
                for m in messages
            ],
            events=[_event(e) for e in events],
            steps=[_step(s) for s in steps],
            sequence=sequence,
        )
        if progress is not None:
            request.progress = progress
        return await self._unary("Report", request)

    async def upload_file(
        self,
        call_id: str,
        name: str,
        data: bytes | AsyncIterable[bytes] | Iterable[bytes],
        *,
        media_type: str = "",
        timeout: float | None = None,
    ) -> f.FileInfo:
        """Stream one output file to the call's folder (replacing one of the same name)."""

        async def pieces() -> AsyncIterator[bytes]:
            if isinstance(data, bytes | bytearray | memoryview):
                raw = bytes(data)
                for start in range(0, max(len(raw), 1), UPLOAD_CHUNK_BYTES):
                    yield raw[start : start + UPLOAD_CHUNK_BYTES]
            elif isinstance(data, AsyncIterable):
                async for piece in data:
                    yield piece
            else:
                for piece in data:
                    yield piece

        async def chunks() -> AsyncIterator[f.FileChunk]:
            first = True
            async for piece in pieces():
                for start in range(0, max(len(piece), 1), UPLOAD_CHUNK_BYTES):
                    part = piece[start : start + UPLOAD_CHUNK_BYTES]
                    if first:
                        yield f.FileChunk(
                            call_id=call_id, name=name, data=part, media_type=media_type
                        )
                        first = False
                    else:
                        yield f.FileChunk(data=part)
            if first:
                yield f.FileChunk(call_id=call_id, name=name, media_type=media_type)

        try:
            return await self.stub.UploadFile(
                chunks(), metadata=self._metadata(), timeout=timeout or max(self.timeout, 120.0)
            )
        except grpc.aio.AioRpcError as exc:
            raise errors.from_trailers(
                exc.code(), exc.details() or exc.code().name, exc.trailing_metadata()
            ) from None

    async def ask_input(
        self,
        call_id: str,
        ask_id: str,
        question: str,
        *,
        wait_seconds: int = 0,
        withdraw: bool = False,
        choices: Sequence[str] = (),
    ) -> f.AskInputResponse:
        """Ask a human-input question (once per ask_id) and wait for the reply (F11); with
        `choices`, the reply is one of them; with `withdraw`, stop waiting for it (a reply
        that came first is returned)."""
        return await self._unary(
            "AskInput",
            f.AskInputRequest(
                call_id=call_id,
                ask_id=ask_id,
                question=question,
                wait_seconds=wait_seconds,
                withdraw=withdraw,
                choices=list(choices),
            ),
            timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS),
        )

    async def finish_execution(
        self,
        call_id: str,
        *,
        final_message: str = "",
        failed: bool = False,
        error: str = "",
        correction_round: int = 0,
        claim_next: Iterable[str] = (),
        lease_seconds: int = 0,
        interrupted: bool = False,
    ) -> f.FinishExecutionResponse:
        """Report the execution's terminal outcome; may ask for the correction turn (F10).
        With `interrupted`, give it up unfinished: the call ends `interrupted` (F12).

        With `claim_next` (targets), a finish that ends the call also claims the next
        execution of those targets, without waiting: `response.next` when one was ready.
        """
        request = f.FinishExecutionRequest(
            call_id=call_id,
            final_message=final_message,
            failed=failed,
            error=error,
            correction_round=correction_round,
            interrupted=interrupted,
        )
        targets = [target_ref(t) for t in claim_next]
        if targets:
            request.claim_next.CopyFrom(
                f.ClaimExecutionRequest(targets=targets, lease_seconds=lease_seconds)
            )
        return await self._unary("FinishExecution", request)
