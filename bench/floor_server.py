"""The RPC floor: an empty unary method on the same server stack as the services.

Same `GrpcServer` (identity interceptor, metrics, options) with one generic method that
does nothing, so "send throughput / floor" says what the messaging work itself costs.
"""

from __future__ import annotations

import asyncio
import os

import grpc

from agentworks.client.keys import TrustedKeys
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import wait_for_signal

METHOD = "/agentworks.bench.Floor/Empty"


async def _empty(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b""


def _register(server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(
        _empty, request_deserializer=None, response_serializer=None
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("agentworks.bench.Floor", {"Empty": handler}),)
    )


async def main() -> None:
    server = GrpcServer(
        name="floor",
        listen=os.environ["FLOOR_LISTEN"],
        trusted_keys=TrustedKeys.load(os.environ["AGENTWORKS_TRUSTED_KEYS"]),
        register=_register,
        service_names=["agentworks.bench.Floor"],
    )
    await server.start()
    await wait_for_signal()
    await server.stop(1)


if __name__ == "__main__":
    asyncio.run(main())
