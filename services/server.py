"""Running the services in one process: the composition root, the one module that puts
services together (engine, bot player, scoring, the views projection and the HTTP API with
scoring's routes beside the lobby's).

Each service's modules are imported where that service is started, only in a process that
runs it (issue 25): every process imported every service, the lobby's HTTP API, its web
pages and the AsyncAPI document included. A `caravel part engine` now starts on 1,387
modules instead of 1,523 and 0.6 CPU seconds less (1.25-1.38 s against 1.95-1.99 s), the
pipeline child of `caravel up` (started again whenever it dies) on 1,457 and ~0.2 s less
(benchmarks/README.md, "Process costs")."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from services.children import (
    Children,
    describe,
    die_with_parent,
    running_children,
    tell_parent,
)
from services.health import Health, dead_loops, operations_routes
from services.httpwrites import CorkedHttpToolsProtocol
from services.runtime import (
    RedisPools,
    Stopped,
    freeze_survivors,
    redis_for,
    stop_on_signals,
    thaw_now_and_then,
    tune_collector,
    wait_for,
)
from shared.bus import Keys
from shared.httpapi import METHODS, error_response
from shared.observability.metrics import RedisSampler
from shared.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine as SQLEngine

KEEP_ALIVE_S = 75  # an idle HTTP connection is closed after this (as nginx does)


async def serve(
    settings: Settings,
    engine: bool = True,
    lobby: bool = True,
    ai: bool = True,
    scoring: bool = True,
    views: bool | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM; ``engine``, ``lobby``, ``ai``, ``scoring`` and
    ``views`` (the views projection: with the lobby unless said) choose what runs. `caravel
    up` (all of them) spreads them over ``settings.process_count()`` processes: see
    :func:`services.children.layout`."""
    keys = Keys(settings.key_prefix, settings.partitions)
    chosen = Services(engine, lobby, ai, scoring, lobby if views is None else views)
    spread = chosen == ALL and settings.process_count() > 1
    if spread:  # the pipeline runs in a child: the HTTP API here
        chosen = Services(engine=False, lobby=True, ai=False, scoring=False, views=False)
    share = settings.http_share_port or (spread and settings.process_count() > 2)
    die_with_parent(settings)
    stop = stop_on_signals()
    early = _Starting(settings, lobby, share)
    await early.open()
    try:
        await _serve(settings, keys, stop, chosen, spread, share, early)
    except Stopped:
        return  # stopped before Redis or the database answered: nothing was started
    finally:
        await early.close()


@dataclass(frozen=True)
class Services:
    """The services one process runs."""

    engine: bool
    lobby: bool
    ai: bool
    scoring: bool
    views: bool


ALL = Services(engine=True, lobby=True, ai=True, scoring=True, views=True)


class _Starting:
    """The probes of a process still waiting for Redis or its database, on the port it will
    serve on: ``/livez`` 200, ``/readyz`` 503 saying what it waits for (a refused
    connection would tell an orchestrator nothing), any other path 503 ``starting``. Closed
    before the services start; not opened on a port shared with other lobbies."""

    def __init__(self, settings: Settings, lobby: bool, share: bool) -> None:
        self.settings = settings
        self.port = settings.http_port if lobby else settings.metrics_port
        self.share = lobby and share
        self.waiting_for: str | None = "redis"
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    def note(self, what: str | None) -> None:
        self.waiting_for = what

    async def open(self) -> None:
        if self.share:  # a port shared with serving lobbies: only ready processes take it
            return
        sockets = _listen(self.settings.http_host, self.port, required=False)
        if not sockets:
            return
        app = FastAPI(title="Caravel starting")

        @app.get("/livez")
        async def livez() -> dict[str, str]:
            return {"status": "ok"}

        @app.get("/readyz")
        async def readyz() -> JSONResponse:
            return error_response(503, "not_ready", f"waiting for {self.waiting_for or 'start'}")

        @app.api_route("/{path:path}", methods=list(METHODS))
        async def starting(path: str) -> JSONResponse:
            message = f"starting: waiting for {self.waiting_for or 'start'}"
            return error_response(503, "starting", message)

        self._server = _Server(uvicorn.Config(app, log_level="warning", log_config=None))
        self._task = asyncio.create_task(self._server.serve(sockets), name="starting")

    async def close(self) -> None:
        """Stop, closing the connections still open, again and again until the server is
        done: a client polling ``/readyz`` over a kept-alive connection never lets it go
        idle, and a graceful stop would wait for it for good (the real app could never take
        the port). The client sees its connection closed and connects again; until uvicorn
        notices ``should_exit`` (up to 0.1 s) it still accepts, and a connection closed
        once, before that, left the one made after it holding the stop for good."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            while not self._task.done():
                for connection in list(self._server.server_state.connections):
                    connection.transport.close()
                await asyncio.wait({self._task}, timeout=0.02)
            await self._task
            self._server = self._task = None


def _sql(url: str, scoring_tables: bool) -> SQLEngine:
    """The SQL engine, the lobby's tables at their head revision, and the scoring ones too
    when this process scores or serves scoring's routes (beside the lobby's): ready before
    the first request, whichever service migrates first."""
    from services.lobby.db import make_engine

    db = make_engine(url)
    if scoring_tables:
        from services.scoring.db import create_tables as migrate_scoring

        migrate_scoring(db)
    return db


async def _serve(
    settings: Settings,
    keys: Keys,
    stop: asyncio.Event,
    services: Services,
    spread: bool,
    share: bool,
    early: _Starting,
) -> None:
    """The services chosen, once Redis and SQL answer; with ``spread``, the children of
    `caravel up` too, started once this process has migrated the database."""
    async with redis_for(settings, stop, early.note) as pools:
        # One pool for all: the lobby's and scoring's tables, and the engine's archive.
        db = None
        if services.scoring or services.lobby or services.engine:
            url = settings.sql_url()
            tables = services.scoring or services.lobby
            make = lambda: asyncio.to_thread(_sql, url, tables)  # noqa: E731
            db = await wait_for("sql", make, stop, early.note)
        async with running_children(settings, pools.url, stop, spread) as children:
            await _run(settings, keys, stop, services, share, pools, db, children, early)


async def _run(
    settings: Settings,
    keys: Keys,
    stop: asyncio.Event,
    services: Services,
    share: bool,
    pools: RedisPools,
    db: SQLEngine | None,
    children: Children | None,
    early: _Starting,
) -> None:
    """The services' loops and the HTTP server of this process, until ``stop``; the early
    probes keep the port until the app is made (no moment with nothing listening)."""
    tasks = _loops(settings, keys, stop, services, pools, db)
    if services.lobby:
        from services.asyncapi import document as asyncapi_document
        from services.lobby.app import create_app
        from services.lobby.matchmaking import Matchmaker
        from services.scoring.http import router as scoring_routes

        assert db is not None
        app = create_app(
            pools.client(),
            keys,
            db,
            settings,
            routers=[scoring_routes],
            asyncapi=asyncapi_document(keys),
        )
        matchmaker = Matchmaker(app.state.lobby, settings.match_wait_s)
        tasks.append(asyncio.create_task(matchmaker.run(stop), name="matchmaker"))
        await early.close()  # the services' own probes take the port from here
        sockets = _listen(settings.http_host, settings.http_port, share=share)
        if share and children is not None:  # the port is shared: the whole picture here
            sockets += _listen(settings.http_host, settings.metrics_port, required=False)
        if settings.child_ready_fd is None:
            _announce(settings)
    else:  # metrics and health only, on a port of their own (0: none)
        app = FastAPI(title="Caravel operations")
        await early.close()
        sockets = _listen(settings.http_host, settings.metrics_port, required=False)
    if settings.child_ready_fd is not None:  # a child: its parent scrapes it here
        sockets = [*sockets, _listen("127.0.0.1", 0, any_port=True)[0]]
    redis = pools.client()  # metrics and health
    if settings.child_ready_fd is None:  # Redis' figures: one sampler per `caravel up`
        tasks.append(asyncio.create_task(RedisSampler(redis, keys).run(stop), name="sampler"))
    if not services.lobby:  # the services child: its young collections free nothing
        freeze_survivors()
        tasks.append(asyncio.create_task(thaw_now_and_then(stop), name="collector"))
    health = Health(redis, db, tasks, children)
    app.include_router(operations_routes(health))
    server = None
    port = sockets[-1].getsockname()[1] if sockets else 0  # before uvloop's server owns them
    if sockets:
        server = _Server(_http_config(app, settings))
        tasks.append(asyncio.create_task(server.serve(sockets), name="http"))
    tune_collector()
    if server is not None:
        while not server.started and not tasks[-1].done() and not stop.is_set():
            await asyncio.sleep(0.01)  # until it serves its port: then a child says it serves
    tell_parent(settings, port)
    dead = await _until_stopped_or_dead(stop, tasks)
    if dead:  # the others wind down with it: a process serving half its part is not kept
        stop.set()
    if server is not None:
        server.should_exit = True
    if not dead:
        await asyncio.gather(*tasks)  # an error raised while stopping is raised here
        return
    await asyncio.gather(*tasks, return_exceptions=True)  # the dead ones' errors are known
    raise LoopDied("; ".join(dead))


class LoopDied(Exception):
    """A service loop of this process ended with an error (:func:`services.health.dead_loops`):
    every loop retries what fails for a while (Redis or SQL away, a shard refusing), so one
    that ended will not come back in this process. The process exits 1 rather than live on
    serving half its part (a scoring service that scored nothing more, issue 25): whatever
    started it (`caravel up` for its children, systemd, Kubernetes) starts it again, and its
    exit says why."""


async def _until_stopped_or_dead(stop: asyncio.Event, tasks: list[asyncio.Task[None]]) -> list[str]:
    """Wait for ``stop``, or for loops among ``tasks`` to end with an error: those loops
    (none when stopped). A loop that ends without one (nothing to do in this process) is
    let go."""
    stopping = asyncio.create_task(stop.wait(), name="stop")
    running: set[asyncio.Task[Any]] = set(tasks)
    try:
        while running and not stop.is_set():
            done, running = await asyncio.wait(
                running | {stopping}, return_when=asyncio.FIRST_COMPLETED
            )
            running.discard(stopping)
            dead = dead_loops([task for task in tasks if task in done])
            if dead:
                return dead
        await stop.wait()
        return []
    finally:
        stopping.cancel()


def _loops(
    settings: Settings,
    keys: Keys,
    stop: asyncio.Event,
    services: Services,
    pools: RedisPools,
    db: SQLEngine | None,
) -> list[asyncio.Task[None]]:
    """The loops of the services chosen (the lobby's own are started with its app), each
    service's modules imported here, when it runs."""
    tasks = []
    if services.engine:
        from services.engine import Engine
        from services.engine.janitor import Janitor
        from shared.eventstore import Archive

        assert db is not None
        archive = Archive(db)
        engine_service = Engine(pools.client(), settings, keys, archive=archive)
        tasks.append(asyncio.create_task(engine_service.run(stop), name="engine"))
        # Trims and archives the partitions this engine holds the lease of.
        janitor = Janitor(pools.client(), keys, settings, archive, lambda: engine_service.held)
        tasks.append(asyncio.create_task(janitor.run(stop), name="janitor"))
    if services.ai:
        from services.ai.service import BotPlayer

        bots = BotPlayer(pools.client(), keys, settings)
        tasks.append(asyncio.create_task(bots.run(stop), name="ai"))
    if services.scoring:
        from services.scoring.service import ScoringService

        assert db is not None
        scorer = ScoringService(
            pools.client(), keys, db, settings.batch_size, settings.scoring_commit_ms / 1000
        )
        tasks.append(asyncio.create_task(scorer.run(stop), name="scoring"))
    if services.views:
        from services.lobby.views import ViewProjector

        projector = ViewProjector(
            pools.client(),
            keys,
            claim_idle_ms=settings.claim_idle_ms,
            retention_s=settings.stream_retention_s,
            dead_after_ms=settings.dead_letter_after_ms,
        )
        tasks.append(asyncio.create_task(projector.run(stop), name="views"))
    return tasks


def _http_config(app: FastAPI, settings: Settings) -> uvicorn.Config:
    """uvicorn's settings for the HTTP API (or the metrics and health of a process
    without it)."""
    return uvicorn.Config(
        app,
        log_level="warning",
        log_config=None,  # its lines go through configure_logging: JSON
        http=CorkedHttpToolsProtocol,  # an answer's head and body in one write (issue 24)
        timeout_graceful_shutdown=3,  # open WebSockets do not hold a stop up
        # Longer than clients keep an idle connection (httpx: 5 s, uvicorn's own
        # default): a client never reuses a connection the server is just closing
        # (a request lost to that race is a ReadError on the client).
        timeout_keep_alive=KEEP_ALIVE_S,
        ws_max_size=settings.max_body_bytes,  # a larger frame closes the socket (1009)
        # Frames are small JSON documents sent to many sockets: compressing each one
        # per socket cost more CPU (~3% of a loaded server) than it saves bytes.
        ws_per_message_deflate=False,
    )


class _Server(uvicorn.Server):
    """uvicorn without signal handlers of its own: SIGINT and SIGTERM set the one stop event
    of the process (``stop_on_signals``), and every service winds down together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _announce(settings: Settings) -> None:
    """Say where the API is, once its port is bound: the JSON logs on stderr are for
    machines; these five lines on stdout are what a person starting Caravel looks for."""
    any_address = settings.http_host in ("0.0.0.0", "::", "")
    url = f"http://{'127.0.0.1' if any_address else settings.http_host}:{settings.http_port}"
    print(f"Caravel serves  {url}", flush=True)
    print(f"Play at         {url}/  (open it in a browser)", flush=True)
    print(f"API docs at     {url}/docs", flush=True)
    print(f"Data folder     {settings.data_dir.resolve()}", flush=True)
    print(f"Processes       {describe(settings.process_count())}", flush=True)


def _listen(
    host: str, port: int, required: bool = True, share: bool = False, any_port: bool = False
) -> list[socket.socket]:
    """A socket bound to ``host``:``port`` (port 0: none, or any free one with
    ``any_port``). Only the HTTP API must have its port: a second engine on one host finds
    the metrics port taken, says so, and runs without it. ``share``: every process binding
    the port so shares it (``SO_REUSEPORT``)."""
    if not port and not any_port:
        return []
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if share:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        if required:
            raise
        structlog.get_logger("caravel").warning("metrics port taken: no metrics", port=port)
        return []
    return [sock]
