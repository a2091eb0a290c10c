"""An A2A push config on the wire and what a push posts (X2, N2).

A config read back (Get, List, the Create answer) is its id, task id, URL, token and
authentication scheme; the authentication's credentials are never read back. A push is
the body a2a-sdk's own push sender posts: A2A's `StreamResponse` with the whole task
(`{"task": {...}}`, JSON names as `MessageToDict` gives them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from a2a.types.a2a_pb2 import AuthenticationInfo, StreamResponse, Task, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToDict

from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.call_tasks import Phase, task_view

# The header A2A receivers read the config's token from (a2a-sdk's push sender's).
TOKEN_HEADER = "X-A2A-Notification-Token"
# `authentication.scheme` naming a Standard Webhooks secret (`whsec_...`) to sign the
# pushes with, instead of an Authorization header to send (matched in any case).
SIGNING_SCHEME = "standardwebhooks"
# The delivery's event type (listed with the delivery; the body is A2A's).
EVENT_TYPE = "a2a.task"


@dataclass(frozen=True)
class PushConfig:
    """A stored push config of a call's task, and where its follower stands."""

    endpoint_id: str
    call_id: str
    config_id: str
    principal: str
    url: str
    token: str
    auth_scheme: str
    created_at: datetime
    last_state: str = ""
    done_at: datetime | None = None
    last_error: str = ""


def to_proto(config: PushConfig) -> TaskPushNotificationConfig:
    """The config as A2A reads it back (no credentials)."""
    out = TaskPushNotificationConfig(
        id=config.config_id, task_id=config.call_id, url=config.url, token=config.token
    )
    if config.auth_scheme:
        out.authentication.CopyFrom(AuthenticationInfo(scheme=config.auth_scheme))
    return out


def state_of(status: f.CallStatus) -> str:
    """What a push is sent for: the task's state, and for input-required its question
    (a second question is a new state); progress lines are not pushed."""
    view = task_view(status)
    if view.phase is Phase.INPUT_REQUIRED:
        return f"{view.phase}:" + hashlib.sha256(view.message.encode()).hexdigest()[:16]
    return str(view.phase)


def push_body(task: Task) -> bytes:
    """The JSON body of one push: `{"task": <the task>}` (compact, UTF-8)."""
    document = MessageToDict(StreamResponse(task=task))
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
