"""Where the gateway is and which token to present: flags, environment, the cli.json of
`agentworks up` (G3)."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agentworks.core.errors import Reason
from agentworks_cli.api import ApiError
from agentworks_cli.errors import EXIT_AUTH, UsageError

DEFAULT_URL = "http://127.0.0.1:8080"
CONFIG_FILE = Path(".agentworks") / "cli.json"


@dataclass(frozen=True)
class Settings:
    """Where the gateway is and which token to present."""

    url: str
    token: str
    url_source: str
    token_source: str
    # The cli.json of `agentworks up` that gave the token or the URL, or was read for a
    # token and had none ("" otherwise), and where it was looked for: both for messages.
    config: str = ""
    searched: str = ""


def _owned_by_user(file: Path) -> bool:
    """Whether the current user owns `file` (always true where there are no uids)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return True
    try:
        return file.stat().st_uid == getuid()
    except OSError:
        return False


def find_config(environ: Mapping[str, str], cwd: Path) -> tuple[Path | None, str]:
    """The cli.json `agentworks up` wrote, and where it was looked for (for messages):
    `$AGENTWORKS_HOME/cli.json` when AGENTWORKS_HOME is set, else `.agentworks/cli.json`
    in `cwd` or the nearest parent that has one (as git finds `.git`). A file another
    user owns (one planted in /tmp/.agentworks, say) is ignored, and the message says so."""
    home = environ.get("AGENTWORKS_HOME")
    if home:
        file = cwd / home / CONFIG_FILE.name
        searched = f"{file} (from AGENTWORKS_HOME)"
        if not file.is_file():
            return None, searched
        if not _owned_by_user(file):
            return None, f"{searched}, ignored: {file} is not owned by you"
        return file, searched
    ignored: list[str] = []
    for directory in (cwd, *cwd.parents):
        file = directory / CONFIG_FILE
        if file.is_file():
            if _owned_by_user(file):
                return file, str(file)
            ignored.append(str(file))
    searched = f"{CONFIG_FILE} in {cwd} and its parents"
    if ignored:
        searched += f" (ignored, not owned by you: {', '.join(ignored)})"
    return None, searched


def on_this_machine(url: str) -> bool:
    """Whether `url` is a gateway on this machine (a loopback address or localhost), as
    the URL `agentworks up` writes in its cli.json is."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _read_config(file: Path) -> dict[str, object]:
    try:
        stored = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {file}: {exc}; fix or delete it") from None
    if not isinstance(stored, dict):
        raise UsageError(f"{file} must hold a JSON object with keys url and token")
    return stored


def resolve_settings(
    url: str | None, token: str | None, environ: Mapping[str, str], cwd: Path
) -> Settings:
    """Flags first, then AGENTWORKS_URL / AGENTWORKS_TOKEN, then the cli.json that
    `agentworks up` wrote in its home (`find_config`). The cli.json gives the token when
    none is given, and with it its URL. A token given without a URL (`--token` alone) goes
    to the cli.json's URL only when that URL is on this machine (what `agentworks up`
    writes): a token is never sent elsewhere by a cli.json (one shipped in a cloned
    repository, say), and an unreadable cli.json is no obstacle then."""

    def given(flag: str | None, env_name: str, key: str) -> tuple[str, str]:
        if flag:
            return flag, f"--{key}"
        if environ.get(env_name):
            return environ[env_name], env_name
        return "", ""

    resolved_url, url_source = given(url, "AGENTWORKS_URL", "url")
    resolved_token, token_source = given(token, "AGENTWORKS_TOKEN", "token")
    file: Path | None = None
    used: Path | None = None  # the cli.json that gave the token or the URL
    searched = ""
    if not resolved_token or not resolved_url:
        file, searched = find_config(environ, cwd)
    if file is not None and not resolved_token:
        stored = _read_config(file)
        if stored.get("token"):
            resolved_token, token_source, used = str(stored["token"]), str(file), file
            if not resolved_url and stored.get("url"):
                resolved_url, url_source = str(stored["url"]), str(file)
    elif file is not None and not resolved_url:
        try:
            stored = _read_config(file)
        except UsageError:
            stored = {}
        if stored.get("url") and on_this_machine(str(stored["url"])):
            resolved_url, url_source, used = str(stored["url"]), str(file), file
    return Settings(
        url=resolved_url or DEFAULT_URL,
        token=resolved_token,
        url_source=url_source or "default",
        token_source=token_source,
        config=str(used or (file if not resolved_token else None) or ""),
        searched=searched,
    )


def no_token(settings: Settings) -> UsageError:
    """The error for settings without a token: where one can come from, and where the
    cli.json was looked for."""
    if settings.config:
        where = f"{settings.config} has no token"
    else:
        where = f"looked for {settings.searched}: not found"
    return UsageError(
        "no API token: pass --token, set AGENTWORKS_TOKEN, or run `agentworks up`, which "
        f"writes .agentworks/cli.json ({where}; for a suite started with --home DIR: "
        "export AGENTWORKS_HOME=DIR); an operator can create a token with "
        "`agentworks tokens create`",
        EXIT_AUTH,
    )


def url_origin(exc: ApiError, settings: Settings) -> ApiError:
    """A gateway that cannot be reached: say where its URL came from (a stale cli.json
    of a suite that has stopped shows at once)."""
    if exc.reason != Reason.UNREACHABLE:
        return exc
    source = settings.url_source
    if source == "default":
        origin = "is the default (no --url, AGENTWORKS_URL, or cli.json that gave the token)"
    elif source.startswith("--") or source == "AGENTWORKS_URL":
        origin = f"came from {source}"
    else:
        origin = (
            f"came from {source}, written by `agentworks up`: if that suite has stopped, "
            "start it again, or delete the file"
        )
    return ApiError(
        exc.code,
        f"{exc.message}. The URL {origin}",
        reason=exc.reason,
        metadata={**exc.metadata, "url_source": source},
    )
