"""Print a short-lived identity for a development suite, for grpcurl and other gRPC tools.

    grpcurl -plaintext -H "x-agentworks-identity: $(python -m agentworks_dev.identity)" \\
        127.0.0.1:50051 agentworks.messaging.v1.MessagingService/GetTarget ...

The identity is signed with the gateway's key of the suite's home (`agentworks up` keeps
it in `<home>/keys/gateway/`), as the gateway signs for a token's principal: `user:dev`
with the operator role by default. It lives 300 s, the longest any service accepts.
Only whoever can read the suite's home can run this: the same people who hold its
operator token.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

from agentworks.core.identity import OPERATOR, mint
from agentworks.core.keys import KeyDirectory
from agentworks.core.trust import GATEWAY, MAX_LIFETIME_SECONDS
from agentworks_dev.specs import KEYS_DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentworks_dev.identity",
        description="print a short-lived identity signed with a dev suite's gateway key",
    )
    parser.add_argument("--home", default=os.environ.get("AGENTWORKS_HOME", ".agentworks"))
    parser.add_argument("--principal", default="user:dev")
    parser.add_argument("--no-operator", action="store_true", help="without the operator role")
    parser.add_argument("--ttl", type=int, default=MAX_LIFETIME_SECONDS, help="seconds (≤ 300)")
    args = parser.parse_args(argv)
    keys_dir = pathlib.Path(args.home) / KEYS_DIR
    key_path = KeyDirectory(keys_dir).key_path(GATEWAY)
    if not key_path.exists():
        print(
            f"no gateway key at {key_path}: start the suite with `make run` first, or pass --home",
            file=sys.stderr,
        )
        return 2
    key, _ = KeyDirectory(keys_dir).ensure(GATEWAY)
    roles = set() if args.no_operator else {OPERATOR}
    print(mint(args.principal, key, roles=roles, ttl_seconds=min(args.ttl, MAX_LIFETIME_SECONDS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
