"""A message end to end through the messaging service: send, turn, reply, read."""

from agentworks.messaging.v1 import messaging_pb2 as pb


async def test_send_claim_reply_read_C2_C6_C7_C10(clients, demo):
    """C2 C6 C7 C10: a send is queued as a turn; the agent's explicit reply is readable."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")

    receipt = await alice.send("hello", target=demo)
    assert receipt.accepted and receipt.inbox_id and receipt.conversation_id

    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None
    assert turn.reply_inbox_id == receipt.inbox_id
    assert [d.message.text for d in turn.deliveries] == ["hello"]
    assert turn.deliveries[0].kind == pb.DELIVERY_KIND_MESSAGE

    await bot.send_message(turn.reply_inbox_id, "hi back")
    await bot.complete_turn(turn.turn_id)

    page = await alice.read(receipt.inbox_id, wait_seconds=5)
    assert [m.text for m in page.messages] == ["hi back"]
    assert page.messages[0].sender == "agent:demo/bot"
