"""The suite's database: DATABASE_URL when given, else the embedded PostgreSQL."""

from __future__ import annotations

import asyncio
import pathlib

import structlog

from agentworks_dev.specs import StartupError

log = structlog.get_logger("agentworks.up")


async def start_database(database_url: str, home: pathlib.Path) -> tuple[str, bool]:
    """(the database URL, whether it is the embedded PostgreSQL started here).

    With `database_url` set it is used as it is; otherwise the embedded PostgreSQL is
    started with its data in `home/pg` (kept across restarts).
    """
    if database_url:
        log.info("database.configured", source="DATABASE_URL")
        return database_url, False
    from agentworks.server.embedded import start_embedded

    data = home / "pg"
    log.info("database.starting", kind="embedded", data=str(data))
    try:
        url = await asyncio.to_thread(start_embedded, data)
    except Exception as exc:
        raise StartupError(
            f"could not start the embedded PostgreSQL in {data}: {exc}. "
            "Set DATABASE_URL to use another server."
        ) from exc
    log.info("database.ready", kind="embedded", data=str(data))
    return url, True
