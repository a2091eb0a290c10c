"""gRPC server reflection, v1 and v1alpha (G1, issue 26).

`grpcio-reflection` serves only `grpc.reflection.v1alpha.ServerReflection`; `grpcurl` and
newer tools ask `grpc.reflection.v1.ServerReflection` first. The two protocols are the
same messages under another package name, so the same wire bytes, and the v1 service
here is the v1alpha servicer registered under the v1 name.
"""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from grpc_reflection.v1alpha import _async, reflection, reflection_pb2

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE_NAME = reflection.SERVICE_NAME


def enable(service_names: Iterable[str], server: grpc.aio.Server) -> None:
    """Serve reflection (both versions) of `service_names` and of itself on `server`."""
    names = [*service_names, V1ALPHA_SERVICE_NAME, V1_SERVICE_NAME]
    servicer = _async.ReflectionServicer(names)
    for service in (V1ALPHA_SERVICE_NAME, V1_SERVICE_NAME):
        handler = grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": handler}),)
        )
