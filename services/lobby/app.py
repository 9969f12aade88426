"""The public HTTP API: the lobby's routers (tables, the matchmaking queue, running games,
the catalog of games) on one app, with whatever routers the process adds beside them.

Every error has one JSON shape, ``{"code", "message", "details"}``, with a 4xx status for
anything the caller can fix. A seat is proven by the signed token issued on joining.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.telemetry import TelemetryConfig
from fastapi_offline import FastAPIOffline
from redis.asyncio import Redis
from sqlalchemy import Engine

from shared.bus import Keys
from shared.httpapi import install_error_handlers
from shared.settings import Settings

from . import busdocs, catalog, games, idempotency, lean, limits, openapi, queue, tables, web
from .lobby import Lobby

# FastAPI's own OpenTelemetry (HTTP spans, metrics and logs through the global providers)
# off: Caravel's spans are the bus's and the engine's (``shared.bus.tracing``, on with an
# OTLP endpoint, through a provider of its own, never the global one), its metrics its own
# Prometheus ones. On, FastAPI looked the three global providers up on every request to
# find them unset (issue 24).
NO_FASTAPI_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False}


def create_app(
    redis: Redis,
    keys: Keys,
    db: Engine,
    settings: Settings,
    routers: Sequence[APIRouter] = (),
    asyncapi: dict[str, Any] | None = None,
) -> FastAPI:
    """The lobby's app; ``routers`` (scoring's, say) share its error shape and its SQL
    engine (``shared.httpapi.Db``); ``asyncapi``, the bus's AsyncAPI document, is served
    with a page for it (``busdocs``)."""
    lobby = Lobby(redis, keys, db, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """The HTTP server and the lobby's brokers start and stop together."""
        await lobby.start()
        try:
            yield
        finally:
            await lobby.close()

    app = FastAPIOffline(  # /docs and /redoc with their scripts served here: no CDN needed
        static_url="/docs/assets",
        title="Caravel",
        version="0.1.0",
        description="Tables, seats, moves and live views of the games of GET /games.",
        lifespan=lifespan,
        generate_unique_id_function=openapi.operation_id,
        telemetry=NO_FASTAPI_TELEMETRY,
    )
    app.state.lobby = lobby
    app.state.db = db
    install_error_handlers(app)
    idempotency.install(app, redis, keys, lobby.key)  # a repeated Idempotency-Key: the first answer
    limits.install(app, redis, keys, settings)  # body sizes, rates, open sockets (outermost)
    for router in (catalog.router, tables.router, queue.router, games.router, *routers):
        app.include_router(router)
    lean.install(app, games.router, tables.router)  # a move's, a set-up's routes first
    web.install(app)  # the browser client: pages, static files, replay views
    if asyncapi is not None:
        busdocs.install(app, asyncapi)
    openapi.install(app)
    return app
