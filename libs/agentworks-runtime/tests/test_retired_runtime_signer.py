"""The interim `runtime` signer is gone (T1, T2): runtimes act with the identities the
gateway gives for their runtime credentials. A key still listed as `runtime` in a trusted-
keys file (left from before) vouches for nothing: a service refuses what it signed."""

from __future__ import annotations

import json
import uuid

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agentworks.client.functions import FunctionsClient
from agentworks.core import errors
from agentworks.core.identity import Forwarded, mint
from agentworks.core.keys import SigningKey, TrustedKey


async def test_an_identity_signed_as_the_runtime_signer_is_refused_by_a_service_T1_T2(
    functions, signing_keys
):
    """T1 T2: as an attacker holding a leftover `runtime` key whose entry is still in the
    service's trusted keys: an agent's identity signed with it is refused
    (UNAUTHENTICATED) by the functions service, for a runtime's claim as for a listing."""
    private_key = Ed25519PrivateKey.generate()
    kid = f"runtime-leftover-{uuid.uuid4().hex[:8]}"
    # The entry as the interim `agentworks keys init` wrote it, appended as-is.
    path = signing_keys.trusted_path
    entries = json.loads(path.read_text(encoding="utf-8"))
    entries.append(TrustedKey(kid, "runtime", private_key.public_key()).entry())
    path.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    token = mint("agent:demo/demo-bot", SigningKey(kid, "runtime", private_key))
    async with FunctionsClient(functions.address, identity=Forwarded(token)) as attacker:
        with pytest.raises(errors.Unauthenticated):
            await attacker.claim_execution(["crew:demo"], wait_seconds=0, lease_seconds=30)
        with pytest.raises(errors.Unauthenticated):
            await attacker.list_functions("crew:demo")
