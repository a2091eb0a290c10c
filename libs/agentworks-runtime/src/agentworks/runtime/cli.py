"""`agentworks-runtime`, kept importable here: the command lives with the command runner
(`agentworks.runner.cli`, in agentworks-runner), which builds on this SDK. Loaded by name
when asked for, so the SDK itself imports nothing of the runner."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

COMMAND_MODULE = "agentworks.runner.cli"


def _command() -> Any:
    try:
        return importlib.import_module(COMMAND_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name and COMMAND_MODULE.startswith(exc.name):
            sys.exit("agentworks-runtime: the command comes with agentworks-runner: install it")
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Run `agentworks-runtime` (`agentworks.runner.cli.main`)."""
    return int(_command().main(argv))


def __getattr__(name: str) -> Any:
    return getattr(_command(), name)
