"""structlog set-up: JSON lines in services, key-value pairs, request context bound once.

Everything a process logs goes to stderr, one line per event: structlog's own events,
and the standard library's loggers (uvicorn, grpc, asyncio's "Task exception was never
retrieved", warnings), which are rendered by the same processors through structlog's
`ProcessorFormatter`. With JSON on, every line is one JSON object; a traceback is the
`exception` field of its event, not lines of text. stdout is left to the process's own
announcements ("<name> listening on <address>").
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import Any

import structlog

# Marks the root handler this module installed, so a second call replaces it (and
# handlers that others installed, such as pytest's, are left alone).
_HANDLER_FLAG = "_agentworks_handler"


def level_number(level: str) -> int:
    """`info`, `WARNING`, ... as the logging level number; unknown names give INFO
    (settings are checked when read: `agentworks.server.config.LOG_LEVELS`)."""
    numeric = logging.getLevelName(level.strip().upper())
    return numeric if isinstance(numeric, int) else logging.INFO


def configure_logging(service: str, *, level: str = "info", json: bool = True) -> None:
    """Configure structlog and the standard library's root logger for one process."""
    numeric = level_number(level)

    def add_service(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
        # Also on events of threads that never saw the bound context (grpc, excepthook).
        event.setdefault("service", service)
        return event

    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        add_service,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if json:
        renderer = structlog.processors.JSONRenderer()
        # Tracebacks become the `exception` field (one JSON string), never raw lines.
        rendering = [structlog.processors.format_exc_info, renderer]
    else:
        # The console renderer prints exceptions itself.
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        rendering = [renderer]
    structlog.configure(
        processors=[*shared, structlog.processors.StackInfoRenderer(), *rendering],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # One write per event (message and newline together), like the handler below,
        # so lines from both never interleave.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
    )
    setattr(handler, _HANDLER_FLAG, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_FLAG, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    # Libraries' own info and debug chatter stays out; their warnings and errors show.
    root.setLevel(max(numeric, logging.WARNING))
    if json:
        # `warnings.warn` and exceptions nothing caught (main thread or others) as
        # events too, instead of multi-line text.
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread
    structlog.contextvars.bind_contextvars(service=service)


def _log_uncaught(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)
        return
    structlog.get_logger("agentworks").critical(
        "process.uncaught_exception", exc_info=(kind, value, traceback)
    )


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    structlog.get_logger("agentworks").error(
        "thread.uncaught_exception",
        thread=args.thread.name if args.thread else None,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)


bind = structlog.contextvars.bind_contextvars
bound = structlog.contextvars.bound_contextvars
