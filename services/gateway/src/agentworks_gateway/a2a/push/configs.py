"""The use cases of A2A push configs (X2, N2) for the caller of a call's task.

Setting a config checks everything before storing anything: the URL against webhooks
out's address policy (the same `AddressPolicy`, `GATEWAY_WEBHOOKS_ALLOW`), the token
and the authentication, and the task's cap. Who may (the call's caller only, A3) is
the A2A handler's check, which has the call; the store also keys every config by its
principal, so another's is not found.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from standardwebhooks import Webhook

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks_gateway.a2a.push.store import PushStore
from agentworks_gateway.a2a.push.wire import SIGNING_SCHEME, TOKEN_HEADER, PushConfig
from agentworks_gateway.webhooks_out.policy import AddressPolicy
from agentworks_gateway.webhooks_out.sending import new_secret

# The configs one task may have (every caller's together): each is followed and sent on
# its own, so a task's pushes stay a handful.
MAX_CONFIGS_PER_TASK = 5
MAX_CONFIG_ID_CHARS = 128
MAX_TOKEN_CHARS = 1024
MAX_CREDENTIALS_CHARS = 4096
# An HTTP authentication scheme is a token (RFC 9110, 5.6.2).
_SCHEME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
_PRINTABLE = re.compile(r"^[\x20-\x7e]*$")


def _bad(field: str, message: str) -> errors.InvalidArgument:
    return errors.InvalidArgument(
        message + "; nothing was stored",
        reason=errors.Reason.INVALID_VALUE,
        metadata={"field": field},
    )


def _sized(value: str, field: str, most: int) -> str:
    if len(value) > most:
        raise errors.InvalidArgument(
            f"{field} has {len(value)} characters, more than {most}; nothing was stored",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(field, "string.max_len", most),
        )
    if not _PRINTABLE.match(value):
        raise _bad(field, f"{field} must be printable ASCII (it is sent as an HTTP header)")
    return value


@dataclass(frozen=True)
class Checked:
    """A config that passed every check: what to store and send."""

    config_id: str
    url: str
    token: str
    auth_scheme: str
    secret: str
    headers: dict[str, str] = field(default_factory=dict)


class PushConfigs:
    """A2A push configs of calls' tasks, for the caller that set them."""

    def __init__(self, store: PushStore, policy: AddressPolicy, wake: Callable[[], None]) -> None:
        self.store = store
        self.policy = policy
        self.wake = wake  # a new config: its follower starts now, not at the next poll

    async def check(self, params: TaskPushNotificationConfig, task_id: str) -> Checked:
        """The config as it would be stored; InvalidArgument naming what is wrong."""
        config_id = _sized(params.id or task_id, "id", MAX_CONFIG_ID_CHARS)
        await self.policy.check(params.url)
        token = _sized(params.token, "token", MAX_TOKEN_CHARS)
        headers = {TOKEN_HEADER: token} if token else {}
        secret, scheme = new_secret(), ""
        if params.HasField("authentication") and params.authentication.scheme:
            auth = params.authentication
            scheme = auth.scheme
            if not _SCHEME.match(scheme):
                raise _bad(
                    "authentication.scheme",
                    "authentication.scheme must be an HTTP authentication scheme such as Bearer",
                )
            credentials = _sized(
                auth.credentials, "authentication.credentials", MAX_CREDENTIALS_CHARS
            )
            if not credentials:
                raise _bad("authentication.credentials", "authentication.credentials is empty")
            if scheme.lower() == SIGNING_SCHEME:
                try:
                    Webhook(credentials)
                except Exception:  # the package raises several kinds for a bad secret
                    raise _bad(
                        "authentication.credentials",
                        f"authentication scheme {scheme} takes a Standard Webhooks secret "
                        "(whsec_ and base64)",
                    ) from None
                secret = credentials
            else:
                headers["Authorization"] = f"{scheme} {credentials}"
        return Checked(config_id, params.url, token, scheme, secret, headers)

    async def set(self, caller: Identity, call_id: str, checked: Checked) -> PushConfig:
        """Store a checked config on the task; InvalidArgument past the task's cap."""
        config = await self.store.replace(
            endpoint_id="ep_" + uuid.uuid4().hex,
            principal=caller.principal,
            call_id=call_id,
            config_id=checked.config_id,
            url=checked.url,
            secret=checked.secret,
            headers=checked.headers,
            token=checked.token,
            auth_scheme=checked.auth_scheme,
            max_configs=MAX_CONFIGS_PER_TASK,
        )
        if config is None:
            raise errors.InvalidArgument(
                f"task {call_id} has {MAX_CONFIGS_PER_TASK} push configs, the most a task may "
                "have: delete one first; nothing was stored",
                reason=errors.Reason.STORED_LIMIT,
                metadata={"limit": str(MAX_CONFIGS_PER_TASK), "counted": "push configs"},
            )
        self.wake()
        return config

    async def get(self, caller: Identity, call_id: str, config_id: str) -> PushConfig | None:
        found = await self.store.configs(call_id, caller.principal, config_id or call_id)
        return found[0] if found else None

    async def list(self, caller: Identity, call_id: str) -> list[PushConfig]:
        return await self.store.configs(call_id, caller.principal)

    async def delete(self, caller: Identity, call_id: str, config_id: str) -> bool:
        return await self.store.delete(call_id, config_id or call_id, caller.principal)
