"""What a worker checks as it starts: how many executions to run at once, and which
targets and functions it cannot serve (warnings only); for a turn worker, which targets
messaging does not know."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any, Protocol

from agentworks.core import errors
from agentworks.runtime.reporting import describe


class ExecutionWorker(Protocol):
    """What these checks read of an `agentworks.runtime.executions.ExecutionWorker`."""

    targets: tuple[str, ...]
    handler: Any
    client: Any
    log: Any


# Executions run at once when the concurrency is not set: the targets' running limits,
# at most this many (each idle one holds a ClaimExecution long-poll); a target whose limit
# cannot be read counts as the functions service's default limit.
AUTO_CONCURRENCY_MAX = 32

DEFAULT_RUNNING_LIMIT = 4


async def running_limits(worker: ExecutionWorker) -> int:
    """How many executions to run at once when not configured: as many as the
    targets' running limits let be open (F5: calls run in parallel, so a runtime
    that took them one at a time would queue them), at most AUTO_CONCURRENCY_MAX. A
    target the service cannot tell about counts as its default limit."""
    total = 0
    for target in worker.targets:
        try:
            async with asyncio.timeout(5):
                total += (await worker.client.get_target(target)).effective_running_limit
        except (errors.AgentWorksError, TimeoutError) as exc:
            total += DEFAULT_RUNNING_LIMIT
            worker.log.warning(
                "worker.running_limit_unknown",
                target=target,
                assumed=DEFAULT_RUNNING_LIMIT,
                error=describe(exc),
            )
    return max(1, min(total, AUTO_CONCURRENCY_MAX))


def handled_functions(worker: ExecutionWorker) -> set[str] | None:
    """The functions this worker has a handler for; None: all of them."""
    if isinstance(worker.handler, Mapping):
        return set(worker.handler)
    # A CommandRunner handles its configured commands. Looked up, not imported: the
    # runner imports this module, and a worker without one need not load it.
    runner = sys.modules.get("agentworks.runner.runner")
    if runner is not None and isinstance(worker.handler, runner.CommandRunner):
        return set(worker.handler.commands)
    return None


async def check_targets(worker: ExecutionWorker) -> None:
    """At start, warn about what would otherwise go unnoticed: a target the functions
    service does not know (`worker.target_not_registered`: nothing is ever claimed
    for it) and declared functions this worker has no handler for
    (`worker.unhandled_functions`: their calls are claimed here all the same and
    fail). ListFunctions shows only the functions the runtime's principal may call
    (F2), so those are the ones checked. Never fails the start: a target may be
    registered after its runtime starts."""
    handled = handled_functions(worker)
    unregistered: list[str] = []
    unhandled: dict[str, list[str]] = {}
    for target in worker.targets:
        try:
            declared = await worker.client.list_functions(target)
        except errors.NotFound:
            unregistered.append(target)
            continue
        except Exception as exc:  # a hint only: it never stops the worker
            worker.log.debug("worker.functions_unknown", target=target, error=describe(exc))
            continue
        if handled is None:
            continue
        missing = sorted(fn.name for fn in declared if fn.name not in handled)
        if missing:
            unhandled[target] = missing
    if unregistered:
        worker.log.warning(
            "worker.target_not_registered",
            unregistered=unregistered,
            effect="the functions service does not know these targets: no call of "
            "theirs can be claimed until they are registered (check the spelling)",
        )
    if unhandled:
        worker.log.warning(
            "worker.unhandled_functions",
            functions=unhandled,
            effect="this worker claims every function of its targets: calls of these "
            "fail with 'this runtime has no handler for function ...'; serve them here "
            "or run their runtime on other targets",
        )


async def check_turn_targets(worker: Any) -> None:
    """At start, warn about a target messaging does not know
    (`worker.target_not_registered`): a turn worker's claim for it waits as for a quiet
    target, so without this a typo (or a crew nobody registered) looks like a runtime
    with nothing to do. Never fails the start: a target may be registered later."""
    unregistered: list[str] = []
    for target in worker.targets:
        try:
            await worker.client.get_target(target)
        except errors.NotFound:
            unregistered.append(target)
        except Exception as exc:  # a hint only: it never stops the worker
            worker.log.debug("worker.target_unknown", target=target, error=describe(exc))
    if unregistered:
        worker.log.warning(
            "worker.target_not_registered",
            unregistered=unregistered,
            effect="messaging does not know these targets: no turn of theirs can be "
            "claimed until they are registered (agentworks targets register "
            f"{unregistered[0]} --owner <principal>; check the spelling)",
        )
