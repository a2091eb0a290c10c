"""Byte sizes and how they read: shared by the SDK's uploads and the command runner's
limits (`agentworks.runner.limits`)."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def size_text(value: float) -> str:
    """Bytes as a short text: 64 MiB, 1.5 GiB, 512 KiB, 100 bytes."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if value >= size:
            amount = value / size
            return f"{amount:.0f} {unit}" if amount == int(amount) else f"{amount:.1f} {unit}"
    return f"{int(value)} bytes"
