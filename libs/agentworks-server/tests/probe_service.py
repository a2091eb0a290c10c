"""A small service on the shared server library, run as its own process by the B3/B8
tests: `python probe_service.py` with PROBE_* settings (keys, listen, metrics).

Methods of `agentworks.test.Probe`: `Parse` takes a `google.protobuf.ListValue` (a wide
message is expensive to parse) and answers empty; `Block` holds the event loop for the
seconds in its request (a servicer stuck in blocking code, as a frozen check was).
"""

from __future__ import annotations

import asyncio
import time

import grpc
from google.protobuf import struct_pb2

from agentworks.server.config import Env, ServiceConfig
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import start_metrics

SERVICE = "agentworks.test.Probe"


async def _parse(request: struct_pb2.ListValue, context: grpc.aio.ServicerContext) -> bytes:
    return b""


async def _block(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    time.sleep(float(request.decode()))  # noqa: ASYNC251 (on purpose: the loop is stuck)
    return b""


def _register(server: grpc.aio.Server) -> None:
    handlers = {
        "Parse": grpc.unary_unary_rpc_method_handler(
            _parse, request_deserializer=struct_pb2.ListValue.FromString
        ),
        "Block": grpc.unary_unary_rpc_method_handler(_block),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


async def main() -> None:
    config = ServiceConfig.from_env("probe", 0, Env("PROBE"))
    metrics_port = start_metrics(config)
    server = GrpcServer(
        name="probe",
        listen=config.listen,
        trusted_keys=config.trusted_keys,
        register=_register,
        service_names=[SERVICE],
    )
    port = await server.start()
    print(f"port={port} metrics={metrics_port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
