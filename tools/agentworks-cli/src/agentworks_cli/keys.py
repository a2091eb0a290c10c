"""`agentworks keys new|init`: the Ed25519 keys that sign identities (T1), made locally.

No gateway is involved: an operator makes a key pair per signer, gives each signer its
private key only (a Secret each), and everyone the trusted-keys file of the public keys
(docs/operations.md, "Signing keys").
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from agentworks.core.keys import (
    KeyDirectory,
    SigningKey,
    add_trusted_key,
    write_private_key,
)
from agentworks.core.settings import ConfigError
from agentworks.core.trust import STANDARD_SIGNERS, check_signer, vouches_for
from agentworks_cli.errors import EXIT_OK, UsageError
from agentworks_cli.output import note, print_json


def new(args: argparse.Namespace) -> int:
    """A new key pair for one signer: the private key to `--out`, its entry printed."""
    try:
        signer = check_signer(args.signer)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = pathlib.Path(args.out)
    if out.exists():
        raise UsageError(f"{out} exists: a private key is never overwritten; choose another --out")
    key = SigningKey.generate(signer, args.kid or "")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_private_key(out, key)
    if args.trusted:
        try:
            add_trusted_key(args.trusted, key.trusted)
        except (ValueError, OSError) as exc:
            out.unlink()  # a key nobody trusts is of no use
            raise UsageError(f"--trusted {args.trusted}: {exc}") from None
    print_json(key.trusted.entry())
    added = f" and added its entry to {args.trusted}" if args.trusted else ""
    note(
        f"wrote {signer}'s private key {key.kid} to {out} (0600){added}; give it to {signer} "
        f"only. It vouches for {vouches_for(signer)}."
    )
    return EXIT_OK


def init(args: argparse.Namespace) -> int:
    """A key per standard signer under `--dir` (those it has are kept), and the trusted
    keys listing them."""
    keys = KeyDirectory(args.dir, args.trusted or "")
    made: list[dict[str, Any]] = []
    try:
        for signer in STANDARD_SIGNERS:
            key, created = keys.ensure(signer)
            made.append(
                {
                    "signer": signer,
                    "kid": key.kid,
                    "private_key": str(keys.key_path(signer)),
                    "made": created,
                }
            )
    except (ConfigError, OSError) as exc:
        raise UsageError(str(exc)) from None
    print_json({"trusted_keys": str(keys.trusted_path), "keys": made})
    return EXIT_OK


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `keys` to the `agentworks` parser (local: no gateway, no token)."""
    keys_cmd = commands.add_parser(
        "keys", help="make the keys that sign identities (local; no gateway needed)"
    )
    keys_cmds = keys_cmd.add_subparsers(title="actions", metavar="ACTION", required=True)
    new_cmd = keys_cmds.add_parser(
        "new",
        help="a new key pair for one signer; prints its trusted-keys entry",
        description="Make an Ed25519 key pair for SIGNER: the private key goes to --out "
        "(0600, never overwritten), its public entry {kid, signer, public_key} is printed "
        "(and with --trusted added to that trusted-keys file). Signers: gateway (users, "
        "agents, workflows, the operator role), service:<name> (itself; a runtime run as a "
        "service of the deployment: itself with the runtime role). Runtimes otherwise hold "
        "a runtime credential, not a key.",
    )
    new_cmd.add_argument("--signer", required=True, help="gateway or service:<name>")
    new_cmd.add_argument("--out", required=True, help="where to write the private key (PEM)")
    new_cmd.add_argument("--kid", help="the key id (default: <signer>-<12 hex of its hash>)")
    new_cmd.add_argument(
        "--trusted", help="a trusted-keys JSON file to add the public entry to (made if absent)"
    )
    new_cmd.set_defaults(run=new, local=True)
    init_cmd = keys_cmds.add_parser(
        "init",
        help="a key per signer in a directory, and their trusted-keys file",
        description="Make, under --dir, <signer>/signing-key.pem for each of "
        f"{', '.join(STANDARD_SIGNERS)} that has none yet, and the trusted-keys file "
        "listing their public keys (--trusted, default DIR/trusted-keys.json). Prints "
        "what it made and what it kept.",
    )
    init_cmd.add_argument("--dir", required=True, help="the directory of the keys")
    init_cmd.add_argument("--trusted", help="the trusted-keys file (default DIR/trusted-keys.json)")
    init_cmd.set_defaults(run=init, local=True)
