"""The contract's size and count limits (P6), stated once.

A limit a proto field rule states (`buf.validate` in proto/) is read here from the
generated `agentworks.proto_limits` (`make proto`): the proto is its one definition, the
server interceptor checks it (`agentworks.server.validation`), and docs/limits.md lists
it. The rest are limits no field annotation can state (JSON sizes, stored counts,
durations). The gateway builds its JSON Schemas from these names and the runtime SDK
sizes its reports by them, so no copy can drift. Bytes are of UTF-8 text (or of the JSON
document's compact encoding); characters are Unicode code points.
"""

from __future__ import annotations

from datetime import timedelta

from agentworks import proto_limits as rules

KIB = 1024
MIB = 1024 * KIB

# Every long-poll (reads, claims, status waits) waits at most this long per request.
MAX_WAIT_SECONDS = rules.MESSAGING_READ_REQUEST_WAIT_SECONDS_LTE
# JSON documents (parts, inputs, results, attributes) nest at most this deep.
MAX_JSON_DEPTH = 24
# Retry keys a caller chooses (`submission_id`, and a delivery's `idempotency_key`), in
# characters (not bytes), in every service; checks.check_retry_key holds keys to it.
MAX_SUBMISSION_ID = rules.MESSAGING_SEND_REQUEST_SUBMISSION_ID_MAX_LEN
# The largest request message messaging and functions receive, as sent (B8): gRPC refuses
# a larger one from its length prefix, before the service reads a byte of it. The largest
# legal requests (an EnqueueDeliveries cut at ~2 MiB of text, a Report, a result) fit.
MAX_REQUEST_BYTES = 4 * MIB
# The largest gRPC message any channel or server of ours sends or receives (the scheduler
# receives up to this: webhook bodies go there).
MAX_MESSAGE_BYTES = 8 * MIB

# -- messaging (C2-C12) ------------------------------------------------------------------
MAX_TEXT_BYTES = rules.MESSAGING_SEND_REQUEST_TEXT_MAX_BYTES
# Parts as JSON (not a field rule: their JSON is measured, not their size as sent).
MAX_PARTS_BYTES = 256 * KIB
MAX_PAYLOAD_BYTES = rules.MESSAGING_ENQUEUE_DELIVERY_REQUEST_PAYLOAD_MAX_LEN
MAX_ATTRIBUTES_BYTES = rules.MESSAGING_ENQUEUE_DELIVERY_REQUEST_ATTRIBUTES_JSON_MAX_BYTES
MAX_IDEMPOTENCY_KEY = rules.MESSAGING_ENQUEUE_DELIVERY_REQUEST_IDEMPOTENCY_KEY_MAX_LEN
MAX_DELIVERIES_PER_REQUEST = rules.MESSAGING_ENQUEUE_DELIVERIES_REQUEST_ITEMS_MAX_ITEMS
MAX_CLAIM_TARGETS = rules.MESSAGING_CLAIM_TURN_REQUEST_TARGETS_MAX_ITEMS
# Why a turn failed, as its runtime completes it (L12).
MAX_TURN_ERROR_BYTES = rules.MESSAGING_COMPLETE_TURN_REQUEST_ERROR_MAX_BYTES
# A turn's lease (C10, C11), claimed or renewed: 0 means the service's default.
MIN_TURN_LEASE_SECONDS = rules.MESSAGING_CLAIM_TURN_REQUEST_LEASE_SECONDS_GTE
MAX_TURN_LEASE_SECONDS = rules.MESSAGING_CLAIM_TURN_REQUEST_LEASE_SECONDS_LTE
# A page of an inbox (C7): at most this many messages.
MAX_INBOX_PAGE = rules.MESSAGING_READ_REQUEST_LIMIT_LTE

# -- functions (F1-F15), stated in docs/functions.md --------------------------------------
# A target's running limit (F5), and the service default's bound.
MAX_RUNNING_LIMIT = 1000
MAX_DESCRIPTION_BYTES = 4 * KIB
MAX_SCHEMA_BYTES = 64 * KIB
MAX_ALLOWED_CALLERS = 100
MAX_INPUTS_BYTES = 256 * KIB
MAX_PROGRESS_BYTES = rules.FUNCTIONS_REPORT_REQUEST_PROGRESS_MAX_BYTES
MAX_EXECUTION_MESSAGE_BYTES = 64 * KIB
MAX_EVENT_TEXT_BYTES = 8 * KIB
# A status carries the whole step history: 1,000 steps of at most ~2.4 KiB each.
MAX_STEP_NAME_BYTES = 200
MAX_STEP_STATUS_BYTES = 50
MAX_STEP_DETAIL_BYTES = 2 * KIB
MAX_ITEMS_PER_REPORT = rules.FUNCTIONS_REPORT_REQUEST_MESSAGES_MAX_ITEMS
MAX_MESSAGES_PER_CALL = 10_000
MAX_EVENTS_PER_CALL = 10_000
MAX_STEPS_PER_CALL = 1_000
MAX_QUESTION_BYTES = rules.FUNCTIONS_ASK_INPUT_REQUEST_QUESTION_MAX_BYTES
# The answers a question may offer (F11): how many, and each one's characters.
MAX_CHOICES = rules.FUNCTIONS_ASK_INPUT_REQUEST_CHOICES_MAX_ITEMS
MAX_CHOICE_CHARS = rules.FUNCTIONS_ASK_INPUT_REQUEST_CHOICES_ITEMS_MAX_LEN
MAX_REPLY_BYTES = rules.FUNCTIONS_REPLY_REQUEST_TEXT_MAX_BYTES
# Pages of a call's messages and events, and of a file's bytes (F7, F8).
MAX_MESSAGE_PAGE = rules.FUNCTIONS_GET_STATUS_REQUEST_MESSAGE_LIMIT_LTE
MAX_EVENT_PAGE = rules.FUNCTIONS_GET_STATUS_REQUEST_EVENT_LIMIT_LTE
MAX_READ_BYTES = rules.FUNCTIONS_READ_FILE_REQUEST_LIMIT_LTE
# Files are uploaded in chunks of this size.
UPLOAD_CHUNK_BYTES = 256 * KIB
MAX_ASK_ID = 100
MAX_FINAL_MESSAGE_BYTES = rules.FUNCTIONS_FINISH_EXECUTION_REQUEST_FINAL_MESSAGE_MAX_BYTES
MAX_ERROR_BYTES = rules.FUNCTIONS_FINISH_EXECUTION_REQUEST_ERROR_MAX_BYTES
MAX_FILE_BYTES = 64 * MIB
MAX_FILES_PER_CALL = 500
MAX_FILE_NAME_BYTES = 255
MAX_MEDIA_TYPE = 255
MAX_RESULT_BYTES = 1 * MIB

# -- scheduler (S1-S6) -------------------------------------------------------------------
MAX_NOTE_BYTES = rules.SCHEDULER_CREATE_WAKE_UP_REQUEST_NOTE_MAX_BYTES
MAX_PROMPT_BYTES = rules.SCHEDULER_CREATE_SCHEDULE_REQUEST_PROMPT_MAX_BYTES
# Schedule and webhook names, in characters.
MAX_NAME_CHARS = rules.SCHEDULER_CREATE_SCHEDULE_REQUEST_NAME_MAX_LEN
MAX_REASON_CHARS = 500
MAX_DELAY = timedelta(seconds=rules.SCHEDULER_CREATE_WAKE_UP_REQUEST_DELAY_SECONDS_LTE)
MAX_PAST = timedelta(hours=1)
MAX_PREVIEW_SPAN = timedelta(days=100 * 365)
MAX_PENDING_WAKE_UPS = 100
# Each schedule writes a delivery per occurrence, each webhook takes events: per
# conversation, a bound on what one agent can pile up (P6).
MAX_SCHEDULES_PER_CONVERSATION = 100
MAX_WEBHOOKS_PER_CONVERSATION = 100
MAX_DELIVERY_ID_CHARS = 128
MAX_CRON_CHARS = 200
MAX_INTERVAL_SECONDS = 366 * 24 * 3600
MAX_WEBHOOK_BODY_BYTES = 1 * MIB
# A webhook body's limit when not configured (the gateway's and the scheduler's
# *_WEBHOOK_MAX_BODY_BYTES); each allows at most MAX_WEBHOOK_BODY_BYTES.
WEBHOOK_BODY_BYTES_DEFAULT = 256 * KIB
# A page of any list (V1: calls, conversations, targets, wake-ups, schedules, webhooks,
# runtimes) and of a transcript (C12); 0 means LIST_PAGE_DEFAULT.
MAX_LIST_PAGE = rules.MESSAGING_LIST_TARGETS_REQUEST_LIMIT_LTE
LIST_PAGE_DEFAULT = 50
# Previewing a schedule's next occurrences.
MAX_PREVIEW = rules.SCHEDULER_PREVIEW_SCHEDULE_REQUEST_COUNT_LTE
