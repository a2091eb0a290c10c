# Types of the alias module beside it: buf.validate's messages, enums and extensions as
# google.protobuf builds them from protovalidate's descriptor (not typed further here).
from typing import Any

from google.protobuf.descriptor import FieldDescriptor, FileDescriptor

DESCRIPTOR: FileDescriptor
field: FieldDescriptor
message: FieldDescriptor
oneof: FieldDescriptor
IGNORE_IF_ZERO_VALUE: int
IGNORE_ALWAYS: int

def __getattr__(name: str) -> Any: ...
