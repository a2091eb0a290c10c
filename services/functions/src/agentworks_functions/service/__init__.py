"""Functions use cases: declarations, calls, the execution protocol. No gRPC, no SQL here."""

from __future__ import annotations

from agentworks.core.limits import (
    MAX_ALLOWED_CALLERS,
    MAX_ASK_ID,
    MAX_CLAIM_TARGETS,
    MAX_DESCRIPTION_BYTES,
    MAX_ERROR_BYTES,
    MAX_EVENT_TEXT_BYTES,
    MAX_EVENTS_PER_CALL,
    MAX_FILE_BYTES,
    MAX_FILE_NAME_BYTES,
    MAX_FILES_PER_CALL,
    MAX_FINAL_MESSAGE_BYTES,
    MAX_INPUTS_BYTES,
    MAX_ITEMS_PER_REPORT,
    MAX_MEDIA_TYPE,
    MAX_MESSAGES_PER_CALL,
    MAX_PROGRESS_BYTES,
    MAX_QUESTION_BYTES,
    MAX_REPLY_BYTES,
    MAX_RESULT_BYTES,
    MAX_SCHEMA_BYTES,
    MAX_STEP_DETAIL_BYTES,
    MAX_STEP_NAME_BYTES,
    MAX_STEP_STATUS_BYTES,
    MAX_STEPS_PER_CALL,
    MAX_SUBMISSION_ID,
    MAX_WAIT_SECONDS,
)
from agentworks_functions.service.calls import Calls
from agentworks_functions.service.declarations import Declarations
from agentworks_functions.service.executions import Executions
from agentworks_functions.service.finishing import Finishing
from agentworks_functions.service.listing import Listing
from agentworks_functions.service.rules import (
    EVENT_LIMIT_DEFAULT,
    LEASE_DEFAULT,
    MAX_MESSAGE_BYTES,
    MAX_UPLOAD_DRAIN_BYTES,
    MESSAGE_LIMIT_DEFAULT,
    READ_LIMIT_DEFAULT,
    TOOL_EVENT_KINDS,
    NoticeSender,
    _ClaimGate,
    _drain,
    check_claim_targets,
    check_file_name,
    check_size,
    function_not_found,
    log,
    notice_text,
    plain_ending,
    same_finish,
    text_page,
)
from agentworks_functions.service.watching import Watching


class FunctionsService(Declarations, Calls, Watching, Executions, Finishing, Listing):
    """The function contract (A3, F1-F15), its push streams (N1) and the execution
    protocol (R1)."""


__all__ = [
    "EVENT_LIMIT_DEFAULT",
    "LEASE_DEFAULT",
    "MAX_ALLOWED_CALLERS",
    "MAX_ASK_ID",
    "MAX_CLAIM_TARGETS",
    "MAX_DESCRIPTION_BYTES",
    "MAX_ERROR_BYTES",
    "MAX_EVENTS_PER_CALL",
    "MAX_EVENT_TEXT_BYTES",
    "MAX_FILES_PER_CALL",
    "MAX_FILE_BYTES",
    "MAX_FILE_NAME_BYTES",
    "MAX_FINAL_MESSAGE_BYTES",
    "MAX_INPUTS_BYTES",
    "MAX_ITEMS_PER_REPORT",
    "MAX_MEDIA_TYPE",
    "MAX_MESSAGES_PER_CALL",
    "MAX_MESSAGE_BYTES",
    "MAX_PROGRESS_BYTES",
    "MAX_QUESTION_BYTES",
    "MAX_REPLY_BYTES",
    "MAX_RESULT_BYTES",
    "MAX_SCHEMA_BYTES",
    "MAX_STEPS_PER_CALL",
    "MAX_STEP_DETAIL_BYTES",
    "MAX_STEP_NAME_BYTES",
    "MAX_STEP_STATUS_BYTES",
    "MAX_SUBMISSION_ID",
    "MAX_UPLOAD_DRAIN_BYTES",
    "MAX_WAIT_SECONDS",
    "MESSAGE_LIMIT_DEFAULT",
    "READ_LIMIT_DEFAULT",
    "TOOL_EVENT_KINDS",
    "FunctionsService",
    "NoticeSender",
    "_ClaimGate",
    "_drain",
    "check_claim_targets",
    "check_file_name",
    "check_size",
    "function_not_found",
    "log",
    "notice_text",
    "plain_ending",
    "same_finish",
    "text_page",
]
