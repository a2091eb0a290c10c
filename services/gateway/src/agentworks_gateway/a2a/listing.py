"""A2A `ListTasks` over the functions service's calls (X2) and the agent listing (X1).

ListTasks lists the calls of this target the caller may see (A3: theirs; the owner and
the operator every one), newest first, a page at a time (`pageToken` is the calls'
cursor). Without `includeArtifacts` each task is read from the call's summary (state,
question or progress); with it, each is read whole (a status read per call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError

from agentworks.client import FunctionsClient
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.a2a.tasks import call_task

_STATES: dict[int, tuple[str, ...]] = {
    TaskState.TASK_STATE_SUBMITTED: ("running",),
    TaskState.TASK_STATE_WORKING: ("running",),
    TaskState.TASK_STATE_INPUT_REQUIRED: ("waiting_for_input",),
    TaskState.TASK_STATE_COMPLETED: ("completed",),
    TaskState.TASK_STATE_FAILED: ("failed", "interrupted"),
    TaskState.TASK_STATE_CANCELED: ("cancelled",),
}


def _summary_status(call: f.CallSummary) -> f.CallStatus:
    """What a call's summary says, as a status (the rest: GetTask)."""
    status = f.CallStatus(
        call_id=call.call_id,
        status=call.status,
        progress=call.progress,
        question=call.question,
        function=call.function,
        caller=call.caller,
        started=True,
    )
    status.target.CopyFrom(call.target)
    status.created_at.CopyFrom(call.created_at)
    if call.HasField("ended_at"):
        status.ended_at.CopyFrom(call.ended_at)
    return status


async def list_call_tasks(
    client: FunctionsClient,
    target: str,
    params: ListTasksRequest,
    task_of: Callable[[str], Awaitable[Task | None]],
) -> ListTasksResponse:
    size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
        raise InvalidParamsError(
            f"pageSize must be 1 to {MAX_LIST_TASKS_PAGE_SIZE}, got {params.page_size}",
            {"field": "pageSize"},
        )
    states = _STATES.get(params.status, ()) if params.status else ()
    page = await client.list_calls(
        target=target, statuses=states, after=params.page_token, limit=size
    )
    tasks = []
    for call in page.calls:
        if params.include_artifacts:
            task = await task_of(call.call_id)
            if task is not None:
                tasks.append(task)
        else:
            tasks.append(call_task(_summary_status(call)))
    return ListTasksResponse(tasks=tasks, next_page_token=page.next_cursor, page_size=size)
