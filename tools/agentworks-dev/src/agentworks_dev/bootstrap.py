"""Bootstrapping a suite: the signing keys, the demo crew registered and declared, the dev
token, and cli.json for the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.registration import register_target
from agentworks.core import errors
from agentworks.core.identity import OPERATOR, Minter
from agentworks.core.keys import KeyDirectory, SigningKey, keys_from_env
from agentworks.core.settings import ConfigError, Env
from agentworks.core.tls import Tls
from agentworks.core.trust import GATEWAY, STANDARD_SIGNERS
from agentworks_dev.home import load_or_create_secret, write_secret
from agentworks_dev.options import Options
from agentworks_dev.probes import grpc_health_serving
from agentworks_dev.specs import (
    DEMO_OWNER,
    DEMO_PRINCIPAL,
    DEMO_TARGET,
    DEV_PRINCIPAL,
    KEYS_DIR,
    REGISTER_SECONDS,
    WEBHOOK_KEY_FILE,
    has_main,
)

log = structlog.get_logger("agentworks.up")


def operator_identity(key: SigningKey) -> Minter:
    """The bootstrap's identity: the dev operator (`user:dev`), signed with the gateway's
    key: only the gateway vouches for users and the operator role (T1), and the
    bootstrap acts for the operator, who holds the deployment's keys."""
    return Minter(DEV_PRINCIPAL, key, roles={OPERATOR})


async def _retry_unavailable(make: Callable[[], Awaitable[object]], deadline: float) -> None:
    """Await `make()`, retrying while the service answers UNAVAILABLE until `deadline`."""
    while True:
        try:
            await make()
            return
        except errors.Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def register_demo_crew(
    key: SigningKey, messaging: str, functions: str | None, tls: Tls | None = None
) -> None:
    """Register `crew:demo` (owner `user:dev`) with messaging and functions, and declare
    the demo functions as the owner (`demo_functions.declare_demo_functions`)."""
    deadline = time.monotonic() + REGISTER_SECONDS
    identity = operator_identity(key)
    async with contextlib.AsyncExitStack() as stack:
        to_messaging = await stack.enter_async_context(
            MessagingClient(messaging, identity=identity, tls=tls)
        )
        to_functions = None
        if functions:
            to_functions = await stack.enter_async_context(
                FunctionsClient(functions, identity=identity, tls=tls)
            )
        await _retry_unavailable(
            lambda: register_target(to_messaging, to_functions, DEMO_TARGET, owner=DEMO_OWNER),
            deadline,
        )
    log.info("target.registered", target=DEMO_TARGET, owner=DEMO_OWNER, registry="messaging")
    if not functions:
        return
    log.info("target.registered", target=DEMO_TARGET, owner=DEMO_OWNER, registry="functions")
    try:
        from agentworks_dev import demo_functions
    except ImportError:
        log.warning("functions.not_declared", reason="agentworks-runtime is not installed")
        return
    # Declaring is the owner's right (F1): act as user:dev, signed with the gateway's key.
    async with FunctionsClient(functions, identity=Minter(DEMO_OWNER, key), tls=tls) as owner:
        declared: list[Any] = []

        async def declare() -> None:
            declared[:] = await demo_functions.declare_demo_functions(owner, DEMO_TARGET)

        await _retry_unavailable(declare, deadline)
    log.info("functions.declared", target=DEMO_TARGET, functions=",".join(f.name for f in declared))


def signing_keys(home: pathlib.Path) -> KeyDirectory:
    """`home/keys`: a private key per signer (`<signer>/signing-key.pem`, 0600) and the
    trusted-keys file of their public halves, made on the first start."""
    keys = KeyDirectory(home / KEYS_DIR)
    for signer in STANDARD_SIGNERS:
        key, made = keys.ensure(signer)
        log.info(
            "signing_key.created" if made else "signing_key.loaded", signer=signer, kid=key.kid
        )
    return keys


def webhook_key(home: pathlib.Path, environ: dict[str, str]) -> str:
    """SCHEDULER_WEBHOOK_KEY when set, else the key kept in `home/webhook.key`."""
    preset = environ.get("SCHEDULER_WEBHOOK_KEY", "")
    if preset:
        return preset
    value, _ = load_or_create_secret(home / WEBHOOK_KEY_FILE, lambda: secrets.token_urlsafe(32))
    return value


def write_cli_config(home: pathlib.Path, gateway_url: str, token: str) -> None:
    """`home/cli.json` (mode 0600): the gateway's URL and the dev token, for the CLI."""
    path = home / "cli.json"
    tmp = path.with_name(".cli.json.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"url": gateway_url, "token": token}, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


async def ensure_dev_token(home: pathlib.Path, database_url: str, environ: dict[str, str]) -> str:
    """The dev token (operator, `user:dev`), kept in `home/dev-token` and stored hashed."""
    try:
        from agentworks_gateway import tokens
    except ImportError:
        log.warning("dev_token.skipped", reason="agentworks_gateway.tokens is not available")
        return ""
    path = home / "dev-token"
    preset = environ.get("AGENTWORKS_DEV_TOKEN", "")
    if preset:
        token = preset
    else:
        token, _ = load_or_create_secret(path, tokens.new_token)

    async def store(value: str) -> None:
        label = "dev (agentworks up)"
        await asyncio.to_thread(
            tokens.ensure_token, database_url, value, DEV_PRINCIPAL, {OPERATOR}, label
        )

    try:
        await store(token)
    except errors.PreconditionFailed:
        if preset:
            raise
        # The saved token was revoked; a revoked token stays revoked, so mint another.
        log.warning("dev_token.revoked", path=str(path), action="issuing a new one")
        token = tokens.new_token()
        write_secret(path, token)
        await store(token)
    return token


RUNTIME_CREDENTIAL_FILE = "runtime-credential"


async def ensure_runtime_credential(home: pathlib.Path, database_url: str) -> str:
    """The demo runtimes' runtime credential (T2: agent:demo/demo-bot, serving crew:demo),
    kept in `home/runtime-credential` (0600) and stored hashed; "" without the gateway."""
    try:
        from agentworks_gateway import tokens
    except ImportError:
        log.warning("runtime_credential.skipped", reason="agentworks_gateway is not available")
        return ""
    path = home / RUNTIME_CREDENTIAL_FILE
    credential, _ = load_or_create_secret(path, tokens.new_runtime_credential)

    async def store(value: str) -> None:
        await asyncio.to_thread(
            tokens.ensure_token,
            database_url,
            value,
            DEMO_PRINCIPAL,
            set(),
            "demo runtimes (agentworks up)",
            targets=[DEMO_TARGET],
        )

    try:
        await store(credential)
    except errors.PreconditionFailed:
        # Revoked (it stays revoked): make another.
        log.warning("runtime_credential.revoked", path=str(path), action="issuing a new one")
        credential = tokens.new_runtime_credential()
        write_secret(path, credential)
        await store(credential)
    return credential


async def bootstrap(options: Options, environ: dict[str, str]) -> int:
    """Register the demo crew and the dev token with already running services, signing
    as the gateway (AGENTWORKS_SIGNING_KEY: the gateway's key; AGENTWORKS_TRUSTED_KEYS)."""
    try:
        key, _ = keys_from_env(Env("AGENTWORKS", environ))
    except ConfigError as exc:
        print(f"agentworks up --bootstrap-only: {exc}", file=sys.stderr)
        return 2
    database_url = environ.get("GATEWAY_DATABASE_URL") or options.database_url
    messaging = environ.get("AGENTWORKS_MESSAGING_ADDRESS") or environ.get(
        "GATEWAY_MESSAGING_ADDRESS", "127.0.0.1:50051"
    )
    functions = environ.get("AGENTWORKS_FUNCTIONS_ADDRESS") or environ.get(
        "GATEWAY_FUNCTIONS_ADDRESS", ""
    )
    if key is None or key.signer != GATEWAY or not database_url:
        print(
            "agentworks up --bootstrap-only: set AGENTWORKS_SIGNING_KEY (the gateway's "
            "key), AGENTWORKS_TRUSTED_KEYS and DATABASE_URL",
            file=sys.stderr,
        )
        return 2
    try:
        # The services' TLS (T5): AGENTWORKS_TLS_CA_FILE, and a certificate for mutual TLS.
        tls = Tls.from_env(Env("AGENTWORKS", environ), server=False)
    except ConfigError as exc:
        print(f"agentworks up --bootstrap-only: {exc}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + options.ready_timeout
    try:
        await grpc_health_serving(messaging.split(",")[0], deadline, tls)
        if functions and has_main("agentworks_functions"):
            await grpc_health_serving(functions.split(",")[0], deadline, tls)
        else:
            functions = ""
        await register_demo_crew(key, messaging, functions or None, tls)
        options.home.mkdir(parents=True, exist_ok=True)
        token = await ensure_dev_token(options.home, database_url, environ)
        # The demo runtimes' credential (T2), into a folder only they and this job mount.
        credential_dir = environ.get("AGENTWORKS_RUNTIME_CREDENTIAL_DIR", "")
        if credential_dir:
            folder = pathlib.Path(credential_dir)
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            if await ensure_runtime_credential(folder, database_url):
                print(f"demo runtime credential kept in {folder / RUNTIME_CREDENTIAL_FILE}")
    except (TimeoutError, errors.AgentWorksError) as exc:
        print(f"agentworks up --bootstrap-only: {exc}", file=sys.stderr)
        return 1
    if not token:
        said = "(none)"
    elif environ.get("AGENTWORKS_DEV_TOKEN"):
        # Set from a Secret: a Job's log is readable more widely than the Secret.
        said = "from AGENTWORKS_DEV_TOKEN (not printed)"
    else:
        said = token  # generated here (and kept in <home>/dev-token)
    print(f"demo crew registered; dev token: {said}", flush=True)
    return 0
