"""Typed clients for the services. Application code uses these, never `*_pb2_grpc`.

Each method takes plain arguments, sends a signed identity and a deadline, and raises
`agentworks.core.errors.AgentWorksError` subclasses on failure. One module per service.
"""

from agentworks.client.common import json_document, target_ref, target_str
from agentworks.client.functions import FunctionsClient as FunctionsClient
from agentworks.client.messaging import MessagingClient, delivery_request
from agentworks.client.scheduler import SchedulerClient as SchedulerClient

__all__ = ["MessagingClient", "delivery_request", "json_document", "target_ref", "target_str"]
