"""Reading settings from the environment, once: `Env(prefix)` and its checks.

Services (through `agentworks.server.config`) and runtimes build their frozen config
dataclasses with `Env`; nothing else reads `os.environ`.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

N = TypeVar("N", int, float)

# The words a yes/no setting takes (any case); anything else is refused.
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
# `LOG_LEVEL` values (any case).
LOG_LEVELS = ("debug", "info", "warning", "warn", "error", "critical")


class ConfigError(ValueError):
    """A setting's value cannot be used; the message names the variable and what it
    must be. Services report it on one line and exit (status 2) instead of starting."""


@dataclass(frozen=True)
class Env:
    """Typed access to `<PREFIX>_<NAME>` variables, falling back to unprefixed ones."""

    prefix: str
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    # The names (without the prefix) asked for so far; see `unknown`.
    asked: set[str] = field(default_factory=set, compare=False, repr=False)

    def _lookup(self, name: str, *, shared: bool) -> tuple[str, str | None]:
        """The variable that holds the setting (the prefixed one unless only the shared
        one is set) and its value, None when unset or empty."""
        self.asked.add(name)
        variable = f"{self.prefix}_{name}"
        value = self.environ.get(variable)
        if (value is None or value == "") and shared and self.environ.get(name):
            variable, value = name, self.environ[name]
        return variable, value if value not in (None, "") else None

    def _raw(self, name: str, *, shared: bool) -> str | None:
        return self._lookup(name, shared=shared)[1]

    def variable(self, name: str, *, shared: bool = False) -> str:
        """The name of the variable a setting is read from, for messages."""
        return self._lookup(name, shared=shared)[0]

    def get_str(self, name: str, default: str = "", *, shared: bool = False) -> str:
        value = self._raw(name, shared=shared)
        return default if value is None else value

    def get_int(
        self,
        name: str,
        default: int,
        *,
        shared: bool = False,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        """An integer setting; a value that is not one, or is out of range, is refused
        with a `ConfigError` naming the variable."""
        variable, value = self._lookup(name, shared=shared)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(f"{variable} must be an integer, got {value!r}") from None
        return self._in_range(variable, value, number, minimum, maximum)

    def get_float(
        self,
        name: str,
        default: float,
        *,
        shared: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float:
        """A number setting; a value that is not a finite number, or is out of range, is
        refused with a `ConfigError` naming the variable."""
        variable, value = self._lookup(name, shared=shared)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{variable} must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ConfigError(f"{variable} must be a finite number, got {value!r}")
        return self._in_range(variable, value, number, minimum, maximum)

    @staticmethod
    def _in_range(variable: str, raw: str, number: N, low: N | None, high: N | None) -> N:
        if (low is not None and number < low) or (high is not None and number > high):
            if high is None:
                wanted = f"at least {low}"
            elif low is None:
                wanted = f"at most {high}"
            else:
                wanted = f"between {low} and {high}"
            raise ConfigError(f"{variable} must be {wanted}, got {raw!r}")
        return number

    def get_bool(self, name: str, default: bool, *, shared: bool = False) -> bool:
        """A yes/no setting: true/yes/on/1 or false/no/off/0 (any case); another value
        is refused with a `ConfigError` naming the variable, not read as false."""
        variable, value = self._lookup(name, shared=shared)
        if value is None:
            return default
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ConfigError(
            f"{variable} must be true or false (also 1/0, yes/no, on/off), got {value!r}"
        )

    def get_choice(
        self, name: str, default: str, choices: tuple[str, ...], *, shared: bool = False
    ) -> str:
        """One of `choices` (any case, returned in lower case); another value is refused."""
        variable, value = self._lookup(name, shared=shared)
        if value is None:
            return default
        word = value.strip().lower()
        if word not in choices:
            raise ConfigError(f"{variable} must be one of {', '.join(choices)}, got {value!r}")
        return word

    def get_address(
        self, name: str, default: str = "", *, shared: bool = False, empty_host: bool = False
    ) -> str:
        """A `host:port` setting (`[::1]:8080` for IPv6; port 0-65535, 0 picks a free
        one); with `empty_host`, `:port` is accepted too. Empty stays empty."""
        variable, value = self._lookup(name, shared=shared)
        if value is None:
            return default
        check_address(variable, value, empty_host=empty_host)
        return value

    def unknown(self, within: str = "") -> list[str]:
        """Each `<PREFIX>_<within>*` variable set but never asked for, as a sentence
        naming it and the closest known setting: a typo, or a setting this version no
        longer has.

        `<PREFIX>_ADDRESS` is left out: it is how the other services reach this one,
        and one environment often serves them all.
        """
        start = f"{self.prefix}_{within}"
        known = sorted(f"{self.prefix}_{name}" for name in self.asked)
        found = []
        for variable in sorted(self.environ):
            name = variable[len(self.prefix) + 1 :]
            if not variable.startswith(start) or name in self.asked or name == "ADDRESS":
                continue
            close = difflib.get_close_matches(variable, known, n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]}?" if close else ""
            found.append(f"{variable} is not a setting and was ignored{hint}")
        return found


def check_address(variable: str, value: str, *, empty_host: bool = False) -> tuple[str, int]:
    """`host:port` split into host (brackets of an IPv6 address removed) and port, or a
    `ConfigError` naming `variable`."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ConfigError(
            f"{variable} must look like host:port (port 0-65535, IPv6 as [::1]:port), got {value!r}"
        )
    if host.startswith("[") != host.endswith("]") or (not host and not empty_host):
        raise ConfigError(f"{variable} must look like host:port, got {value!r}")
    return host.strip("[]"), int(port)
