"""Logging for every process: one JSON object per line on stderr, with the context bound to
the task (game, command, seat) on each."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

import structlog
from structlog.contextvars import bind_contextvars, reset_contextvars


def configure_logging(level: str = "INFO") -> None:
    """structlog JSON lines on stderr, with the context bound to the task (game, command,
    seat) on each; libraries that log through the standard library (uvicorn, asyncio) are
    rendered the same way, so every line of a process is one JSON object."""
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())


@contextlib.contextmanager
def bound(**values: Any) -> Iterator[None]:
    """``values`` on the log lines in the block: their context variables set, then reset to
    what they were, without the look at every bound variable that structlog's
    ``bound_contextvars`` takes on each entry (it copies the whole context to find the
    values to restore: half its cost, paid per move by the lobby's moves and the bot
    player's decisions)."""
    tokens = bind_contextvars(**values)
    try:
        yield
    finally:
        reset_contextvars(**tokens)
