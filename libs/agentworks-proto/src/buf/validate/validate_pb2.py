"""`buf/validate/validate.proto` for google.protobuf, from the protovalidate package.

Our generated stubs import this module (their protos import buf/validate/validate.proto).
protovalidate ships that file's descriptor (for its own protobuf runtime), not its
source nor a google.protobuf module: this registers protovalidate's own descriptor in
the default pool, once, so the rules our stubs carry are read against exactly the
installed protovalidate's schema. `make proto` hands protoc the same descriptor.
"""

from google.protobuf import descriptor_pb2 as _descriptor_pb2  # noqa: F401  (dependencies)
from google.protobuf import descriptor_pool
from google.protobuf import duration_pb2 as _duration_pb2  # noqa: F401
from google.protobuf import field_mask_pb2 as _field_mask_pb2  # noqa: F401
from google.protobuf import timestamp_pb2 as _timestamp_pb2  # noqa: F401
from google.protobuf.internal import builder as _builder
from protovalidate._gen.buf.validate import validate_pb as _validate_pb

DESCRIPTOR = descriptor_pool.Default().AddSerializedFile(_validate_pb._DESC.proto.to_binary())
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, "buf.validate.validate_pb2", globals())
