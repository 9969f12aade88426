"""Running the services in one process: engine, views projection and the HTTP API."""

from __future__ import annotations

import asyncio

import uvicorn

from services.ai.service import BotPlayer
from services.engine import Engine
from services.lobby.app import create_app
from services.lobby.db import make_engine
from services.lobby.matchmaking import Matchmaker
from services.lobby.views import ViewProjector
from services.runtime import redis_for, stop_on_signals
from shared.bus import Keys
from shared.settings import Settings


async def serve(
    settings: Settings, engine: bool = True, lobby: bool = True, ai: bool = True
) -> None:
    """Serve until SIGINT or SIGTERM; ``engine``, ``lobby`` and ``ai`` choose what runs."""
    keys = Keys(settings.key_prefix, settings.partitions)
    async with redis_for(settings) as redis:
        stop = stop_on_signals()
        tasks = []
        if engine:
            tasks.append(asyncio.create_task(Engine(redis, settings, keys).run(stop)))
        if ai:
            tasks.append(asyncio.create_task(BotPlayer(redis, keys, settings).run(stop)))
        server = None
        if lobby:
            projector = ViewProjector(redis, keys)
            tasks.append(asyncio.create_task(projector.run(stop)))
            app = create_app(redis, keys, make_engine(settings.sql_url()), settings)
            matchmaker = Matchmaker(app.state.lobby, settings.match_wait_s)
            tasks.append(asyncio.create_task(matchmaker.run(stop)))
            config = uvicorn.Config(
                app,
                host="127.0.0.1",
                port=settings.http_port,
                log_level="warning",
                timeout_graceful_shutdown=3,  # open WebSockets do not hold a stop up
            )
            server = uvicorn.Server(config)
            server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
            tasks.append(asyncio.create_task(server.serve()))
        await stop.wait()
        if server is not None:
            server.should_exit = True
        await asyncio.gather(*tasks)
