"""How an execution's outcome is reported: the handler's answer as the final message,
the output folder's upload, and the finish with its one retry as a failure (R1, F10-F12).

Failure policy:

- A handler that raises ends the execution `failed` with the exception as the error; no
  correction turn (F10). The error is made to fit what FinishExecution accepts: NUL
  characters are replaced and it is cut to `MAX_ERROR_BYTES`.
- An answer that cannot be reported (not JSON, nested too deep, a result file the service
  refuses, or a final message FinishExecution refuses: too big, NUL characters) ends the
  execution `failed` with "the handler's answer could not be reported: <why>".
- A finish refused even then, or failing after its retries, is logged and the worker
  moves on (the lease expires and the service records the call `interrupted`); a worker
  never stops because of one execution.
- Free text a handler sends through the context (progress, message text, event text,
  a step's detail, a question) is cleaned with `clean_text`, as the command runner
  cleans its output: NUL characters, which PostgreSQL text cannot store, and lone
  surrogates, which cannot be sent, become U+FFFD instead of getting the report
  refused. Names (roles, kinds, tool names, steps, groups, statuses) are not changed: the
  service refuses a bad one, naming it. Nor is the answer: it is the call's result, so
  an answer with a NUL fails the call, saying so, rather than being altered.
- A cancel (F15) or a lost lease (F12) is learned from the next heartbeat, report, ask
  or upload: the handler task is cancelled and nothing more is reported.
- A worker that is itself cancelled leaves its executions unfinished; their leases expire
  and the service records them `interrupted` (F12). When the runtime is stopping
  (`abandon(reason)` before the cancel: `serving.run_until_signal` does it on a second
  signal or when the drain time is over), each execution cut short is given up at once
  instead: it ends `interrupted` with that reason and its saved evidence (F12), so its
  caller learns at once and may call again.
- Whatever the handler leaves in the output folder is uploaded when it ends, successful
  or not (`upload_folder`), except after a cancel or a lost lease.
- At start, the worker looks up the functions of its targets and warns once about a
  target the service does not know (`worker.target_not_registered`) and about declared
  functions it has no handler for (`worker.unhandled_functions`): it claims every
  function of its targets, and their calls fail here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from agentworks.client.functions import FunctionsClient
from agentworks.core import errors
from agentworks.core.checks import check_json_depth
from agentworks.core.limits import MAX_ERROR_BYTES
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.execution_context import ExecutionContext, ExecutionStopped
from agentworks.runtime.reporting import fit_text
from agentworks.runtime.uploads import upload_folder


def answer_text(ctx: ExecutionContext, value: Any) -> str:
    """The final message for what the handler returned (a non-string as JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate cannot be sent (UnicodeEncodeError)
        return value
    check_json_depth(value, "the handler's return value")
    final = json.dumps(value)
    if ctx.output_schema is not None and not ctx.result_file.exists():
        ctx.write_result(value)
    return final


async def upload_outputs(ctx: ExecutionContext) -> dict[str, str]:
    """`upload_folder` after each run of the handler; the files refused. A service
    still failing after the retries is logged: the finish says the rest."""
    try:
        return await upload_folder(ctx)
    except errors.AgentWorksError as exc:
        ctx.log.warning("execution.upload_failed", code=exc.code.name, error=exc.message)
        return {}


async def finish(
    client: FunctionsClient,
    ctx: ExecutionContext,
    *,
    failed: bool,
    final: str,
    error: str,
    correction_round: int,
    claim_next: Sequence[str],
    lease_seconds: int,
) -> f.FinishExecutionResponse | None:
    """FinishExecution (claiming the next execution of `claim_next`); a refused outcome
    is reported again as a failure with the service's reason. None when no finish was
    accepted (logged; the lease expires)."""
    error = fit_text(error, MAX_ERROR_BYTES) if failed else ""
    for attempt in (1, 2):
        try:
            return await ctx._retrying(
                functools.partial(
                    client.finish_execution,
                    ctx.call_id,
                    final_message=final,
                    failed=failed,
                    error=error,
                    correction_round=correction_round,
                    claim_next=claim_next,
                    lease_seconds=lease_seconds,
                )
            )
        except errors.InvalidArgument as refused:
            ctx.log.warning("execution.finish_refused", error=refused.message, failed=failed)
            if attempt == 2:
                break
            what = "error" if failed else "answer"
            failed, final = True, ""
            error = fit_text(
                f"the handler's {what} could not be reported: {refused.message}",
                MAX_ERROR_BYTES,
            )
        except ExecutionStopped:
            raise
        except errors.AgentWorksError as failure:
            ctx.log.error("execution.finish_failed", code=failure.code.name, error=failure.message)
            return None
    ctx.log.error("execution.unreported", reason="FinishExecution refused the outcome")
    return None
