"""The A2A binding's HTTP surface (X1-X3): per target (`crew:demo` -> `/a2a/crew/demo`)

- `GET /a2a/{kind}/{name}/.well-known/agent-card.json`: its agent card;
- `POST /a2a/{kind}/{name}`: A2A's JSON-RPC binding (a2a-sdk's dispatcher over
  `TargetHandler`; SSE for the streaming methods);
- `GET /a2a/agents?cursor=&limit=`: the cards of the targets the caller may see, paged.

Every route takes the gateway's bearer API token (the card's security scheme) and acts
as its principal; the body is read bounded in size and time before a2a-sdk parses it.
A target the caller may not see has no card (404) and its tasks are not found. A target
whose owner turned its card off (`capabilities.a2a_card = false`, `a2a.switch`) is, to
this binding, one that does not exist: no card, not listed, every request 404.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import structlog
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentworks.client import target_str
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.core.limits import LIST_PAGE_DEFAULT, MAX_LIST_PAGE
from agentworks_gateway import metrics, stream_auth
from agentworks_gateway.a2a.card import A2A_PREFIX, agent_card
from agentworks_gateway.a2a.errors import rewrite, stream_refusal
from agentworks_gateway.a2a.handler import TargetHandler
from agentworks_gateway.a2a.push import push_of
from agentworks_gateway.a2a.switch import served_target
from agentworks_gateway.admission import CALLER
from agentworks_gateway.bodies import bounded_body, check_declared_size
from agentworks_gateway.middleware import error_response, replay, request_context
from agentworks_gateway.models import TokenRecord
from agentworks_gateway.service import Gateway, bearer_token

log = structlog.get_logger("agentworks.gateway")

_KINDS = ("crew", "workflow")
# The JSON-RPC methods answered with an event stream.
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})


class _Context(DefaultServerCallContextBuilder):
    """The call context: who is calling (authenticated by the route) and which target."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["identity"] = request.scope["agentworks.identity"]
        context.state["target"] = request.scope["agentworks.target"]
        # The bearer token stays out of the handler (the A2A-Version header is read).
        context.state["headers"].pop("authorization", None)
        return context


class _Dispatcher(JsonRpcDispatcher):
    """a2a-sdk's JSON-RPC dispatcher; refusals A2A has no error for get their own code."""

    def _generate_error_response(self, request_id: Any, error: Any) -> JSONResponse:
        response = super()._generate_error_response(request_id, error)
        return JSONResponse(rewrite(_json(response)), status_code=response.status_code)

    def _create_response(self, context: ServerCallContext, handler_result: Any) -> Response:
        if isinstance(handler_result, dict):
            handler_result = rewrite(handler_result)
        else:
            handler_result = _rewritten(handler_result)
        return super()._create_response(context, handler_result)


async def _rewritten(stream: Any) -> Any:
    async for item in stream:
        yield rewrite(item) if isinstance(item, dict) and "error" in item else item


def _json(response: JSONResponse) -> dict[str, Any]:
    return json.loads(bytes(response.body))


def _target(scope: Scope) -> str:
    params = scope["path_params"]
    kind, name = params["kind"], params["name"]
    if kind not in _KINDS:
        raise errors.NotFound(
            f"no A2A agent at {scope['path']}: agents are /a2a/crew/<name> and /a2a/workflow/<id>",
            metadata=errors.kind_meta("agent", f"{kind}:{name}"),
        )
    return f"{kind}:{name}"


def _base_url(scope: Scope) -> str:
    return str(Request(scope).base_url).rstrip("/")


class A2ABinding:
    """The routes' endpoints, sharing one handler and one dispatcher."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.dispatcher = _Dispatcher(TargetHandler(gateway), context_builder=_Context())

    async def _identity(self, scope: Scope) -> Identity:
        return self.gateway.identity_of(await self._token(scope))

    async def _token(self, scope: Scope) -> TokenRecord:
        headers = dict(scope.get("headers") or ())
        authorization = headers.get(b"authorization")
        value = authorization.decode("latin-1") if authorization else None
        return await self.gateway.token_record(bearer_token(value, "API token"))

    async def card_of(self, identity: Identity, target: str, base_url: str) -> AgentCard:
        """The target's card as the caller sees it (the functions they may call; the
        conversation unless the target's messaging switch is off, C8); NotFound for a
        target that does not exist."""
        listed = await self.gateway.functions(identity).list_targets(target=target, limit=1)
        functions = listed.targets[0].functions if listed.targets else ()
        return await self._card(identity, target, functions, base_url)

    async def _card(
        self, identity: Identity, target: str, functions: Any, base_url: str
    ) -> AgentCard:
        known = await served_target(self.gateway.messaging(identity), target)
        switch = known.capabilities
        conversation = not switch.HasField("free_text_ask") or switch.free_text_ask
        return agent_card(
            target,
            known.owner,
            functions,
            base_url,
            conversation=conversation,
            push_notifications=push_of(self.gateway) is not None,
        )

    async def _listed(
        self, identity: Identity, target: str, functions: Any, base_url: str
    ) -> AgentCard | None:
        """A listed target's card; None when it has none (its card is off, X1)."""
        try:
            return await self._card(identity, target, functions, base_url)
        except errors.NotFound:
            return None

    async def card(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /a2a/{kind}/{name}/.well-known/agent-card.json` (X1)."""
        with request_context(scope):
            try:
                identity = await self._identity(scope)
                card = await self.card_of(identity, _target(scope), _base_url(scope))
            except errors.AgentWorksError as exc:
                metrics.refused("a2a", exc)
                await error_response(exc)(scope, receive, send)
                return
            await JSONResponse(agent_card_to_dict(card))(scope, receive, send)

    async def agents(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`GET /a2a/agents`: the cards of the targets the caller may see (X1)."""
        with request_context(scope):
            request = Request(scope)
            try:
                identity = await self._identity(scope)
                limit = _limit(request.query_params.get("limit", ""))
                listed = await self.gateway.functions(identity).list_targets(
                    after=request.query_params.get("cursor", ""), limit=limit
                )
                base = _base_url(scope)
                cards = await asyncio.gather(
                    *(
                        self._listed(identity, target_str(t.target.ref), t.functions, base)
                        for t in listed.targets
                    )
                )
            except errors.AgentWorksError as exc:
                metrics.refused("a2a", exc)
                await error_response(exc)(scope, receive, send)
                return
            body = {
                "agents": [agent_card_to_dict(card) for card in cards if card is not None],
                "next_cursor": listed.next_cursor,
            }
            await JSONResponse(body)(scope, receive, send)

    async def rpc(self, scope: Scope, receive: Receive, send: Send) -> None:
        """`POST /a2a/{kind}/{name}`: A2A JSON-RPC (X2, X3)."""
        with request_context(scope):
            limit = self.gateway.config.max_body_bytes
            headers = dict(scope.get("headers") or ())
            try:
                check_declared_size(headers.get(b"content-length", b"").decode("latin-1"), limit)
                record = await self._token(scope)
                identity = self.gateway.identity_of(record)
                scope["agentworks.target"] = _target(scope)
                # No agent, no requests (X1): unknown, or its owner turned its card off.
                await served_target(self.gateway.messaging(identity), scope["agentworks.target"])
            except errors.AgentWorksError as exc:
                metrics.refused("a2a", exc)
                await error_response(exc)(scope, receive, send)
                return
            scope["agentworks.identity"] = identity
            token = CALLER.set(identity.principal)
            try:
                with structlog.contextvars.bound_contextvars(principal=identity.principal):
                    with self.gateway.admission.request(identity.principal):
                        body = await bounded_body(
                            Request(scope, receive), limit, self.gateway.config.body_timeout_seconds
                        )
                    request = Request(scope, replay(body, receive))
                    streaming = _streaming(body)
                    if streaming is None:
                        with self.gateway.admission.request(identity.principal):
                            response = await self.dispatcher.handle_requests(request)
                            await response(scope, receive, send)
                        return
                    # A streaming method's answer is an event stream that may stay open
                    # for long: it holds one of the waits, never a request (B6, B7), and
                    # ends with a JSON-RPC error once its token is revoked or expires (A1).
                    with (
                        self.gateway.admission.stream(identity.principal),
                        self.gateway.open_tokens.hold(record.token_id) as token_held,
                    ):
                        response = await self.dispatcher.handle_requests(request)
                        await stream_auth.respond(
                            token_held,
                            response,
                            scope,
                            receive,
                            send,
                            final=lambda exc: stream_refusal(streaming.id, exc),
                            # Both methods answer the task at once (then its updates).
                            first_is_answer=True,
                        )
            except errors.AgentWorksError as exc:
                metrics.refused("a2a", exc)
                await error_response(exc)(scope, receive, send)
            finally:
                CALLER.reset(token)


@dataclass(frozen=True)
class Streaming:
    """A call of one of A2A's streaming methods: its JSON-RPC id."""

    id: Any


def _streaming(body: bytes) -> Streaming | None:
    """The call, when a JSON-RPC body calls one of A2A's streaming methods (a2a-sdk's
    dispatcher parses and refuses what is not a request); None for anything else."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if isinstance(request, dict) and request.get("method") in STREAMING_METHODS:
        return Streaming(request.get("id"))
    return None


def _limit(text: str) -> int:
    if not text:
        return LIST_PAGE_DEFAULT
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIST_PAGE:
        raise errors.InvalidArgument(
            f"limit must be 1 to {MAX_LIST_PAGE}, got {text!r}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("limit", "int32.gte_lte", MAX_LIST_PAGE),
        )
    return int(text)


def a2a_routes(gateway: Gateway) -> list[Route]:
    """The A2A binding's routes, to mount in the gateway's app."""
    binding = A2ABinding(gateway)
    base = A2A_PREFIX + "/{kind}/{name}"
    return [
        Route(A2A_PREFIX + "/agents", _Asgi(binding.agents), methods=["GET"]),
        Route(base + AGENT_CARD_WELL_KNOWN_PATH, _Asgi(binding.card), methods=["GET"]),
        Route(base, _Asgi(binding.rpc), methods=["POST"]),
    ]


class _Asgi:
    """An endpoint served as an ASGI app (Starlette would call a method with a Request)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
