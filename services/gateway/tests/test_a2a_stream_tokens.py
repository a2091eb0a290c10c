"""An A2A stream ends when its token does (A1, G1, X3): a conversation's stream has no
end of its own, so a revoked token must not keep receiving the agent's replies."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import SendMessageRequest, TaskState

from tests.fixtures.a2a_messages import text_message


async def test_a_conversation_stream_ends_when_its_token_is_revoked_A1_G1_X3(
    start_gateway, api, operator_token, demo, bot
):
    """A1 G1 X3, as an attacker: carol streams her conversation over A2A on one replica;
    the operator revokes her token on the other. Her stream ends with a JSON-RPC error
    naming the revocation, and the reply sent after it never reaches her."""
    settings = {"GATEWAY_STREAM_RECHECK_SECONDS": "0.3"}
    first, second = await start_gateway(**settings), await start_gateway(**settings)
    operator = api(operator_token, base_url=second.url)
    created = await operator.post(
        "/api/v1/tools/tokens", json={"action": "create", "principal": "user:carol"}
    )
    token, token_id = created.json()["token"], created.json()["token_id"]
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        card = await A2ACardResolver(http, f"{first.url}/a2a/crew/demo").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        stream = client.send_message(SendMessageRequest(message=text_message("r-1", "hi")))
        async with asyncio.timeout(30):
            opened = await anext(stream)
            assert opened.task.status.state == TaskState.TASK_STATE_WORKING
            turn = await bot.claim_turn([demo], wait_seconds=10)
            assert turn is not None
            await bot.send_message(turn.reply_inbox_id, "before")
            before = await anext(stream)
            assert before.status_update.status.message.parts[0].text == "before"
            revoked = await operator.post(
                "/api/v1/tools/tokens", json={"action": "revoke", "token_id": token_id}
            )
            assert revoked.status_code == 200
            await bot.send_message(turn.reply_inbox_id, "after the revocation")
            with pytest.raises(Exception, match=f"API token {token_id} was revoked"):
                seen = await anext(stream)
                raise AssertionError(f"an event after the revocation: {seen}")
        await client.close()
    assert first.gateway.open_tokens._held == {}
