"""Caravel's side of the peers benchmark: two-seat tables, both seats human, played closed
loop (one move in flight per table) against a running server, with the server's CPU per move.

Two ways to move:

- ``http``: what a plain HTTP client does (the issue 24 baseline): ``POST
  /games/{id}/commands?legal=true`` for the seat to move, then ``GET
  /games/{id}/legal?after_version=`` of the other seat, and the seat with legal commands
  moves next.
- ``ws``: each seat holds its WebSocket; a ``decision`` frame names its legal commands, the
  seat answers with a ``command`` frame on the same socket and gets a ``result`` frame.

A finished game is replaced by a new table (its setup is not counted as moves).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import lean_http  # beside this module (run.py puts its folder on the path)
import psutil
import redis
import websockets

from services.capacity import Plan, free_port, server, server_env, start_table, wait_ready
from services.children import terminate
from services.usage import Usage, cpu_s, usage


@contextlib.contextmanager
def caravel_up(
    python: str, tree: str, processes: int | None = None, **settings: str
) -> Iterator[tuple[str, psutil.Process]]:
    """``caravel up`` of the checkout at ``tree`` on a free port, of ``processes``
    processes (None: its default), with ``settings`` as CARAVEL_<NAME>: its base URL and
    process."""
    with server(processes, tree, python, **settings) as (base, process):
        yield base, psutil.Process(process.pid)


# The services run apart (``--apart``): each ``caravel part`` in a process of its own, the
# HTTP API first (it migrates the database the others then open).
APART = ("lobby", "engine", "ai", "scoring", "views")


@dataclass
class Apart:
    """The services of one checkout as separate processes (``caravel part NAME`` each, as a
    deployment that runs them apart would) on a ``redis-server`` of their own: each
    process' CPU so far, and the Redis' counters."""

    processes: dict[str, int]  # name -> pid
    redis_pid: int
    redis_url: str

    def usage(self) -> Usage:
        """The counters :meth:`Usage.per` compares: every service process (Python) and
        Redis, with its command counts; each process' CPU (``parts``) read in the same
        pass as the totals, before the INFO call that itself costs Redis CPU."""
        parts = {name: cpu_s([pid]) for name, pid in self.processes.items()}
        parts["redis"] = cpu_s([self.redis_pid])
        client = redis.Redis.from_url(self.redis_url)
        try:
            stats: Any = client.info("commandstats")
        finally:
            client.close()
        commands = Counter({k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()})
        python = sum(v for name, v in parts.items() if name != "redis")
        return Usage(python, parts["redis"], commands, parts["lobby"], parts)


@contextlib.contextmanager
def caravel_apart(
    python: str, tree: str, unix: bool = False, redis_port: int | None = None
) -> Iterator[tuple[str, Apart]]:
    """The checkout at ``tree`` served by :data:`APART` processes on a free port, on a
    ``redis-server`` started here (no persistence): its base URL and its processes. With
    ``unix``, every process reaches that Redis on a unix socket (``unix://``, no TCP port
    at all), as a deployment apart on one host may; else over TCP on 127.0.0.1, on
    ``redis_port`` (None: a free one)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cvapart-") as folder:
        socket = os.path.join(folder, "redis.sock")
        tcp = str(redis_port or free_port())
        listen = ["--port", "0", "--unixsocket", socket] if unix else ["--port", tcp]
        store = subprocess.Popen(
            ["redis-server", *listen, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        url = f"unix://{socket}?db=0" if unix else f"redis://127.0.0.1:{listen[1]}/0"
        env = {**server_env(port, "cvapart", metrics_port="0", redis_url=url), "PYTHONPATH": tree}
        started: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name in APART:
                started[name] = subprocess.Popen(
                    [python, "-m", "services.cli", "part", name],
                    env=env,
                    cwd=tree,
                    stdout=subprocess.DEVNULL,
                )
                if name == "lobby":
                    asyncio.run(wait_ready(f"http://127.0.0.1:{port}"))
            base = f"http://127.0.0.1:{port}"
            asyncio.run(_table_started(base))
            yield base, Apart({name: p.pid for name, p in started.items()}, store.pid, url)
        finally:
            terminate([*started.values()][::-1], 60)
            terminate([store], 10)


async def _table_started(base: str, seconds: float = 120) -> None:
    """Wait until a table starts: the engine apart answers (the lobby's start waits for the
    game's log, and refuses with 503 while no engine writes it)."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while True:
            try:
                await new_table(client, "age_of_discovery")
                return
            except httpx.HTTPStatusError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)


@dataclass
class Tally:
    """Moves played in the measured window, and each move's round trip."""

    moves: int = 0
    latencies: list[float] = field(default_factory=list)
    refused: int = 0
    tables: int = 0  # tables set up so far (each a new game)
    errors: Counter[str] = field(default_factory=Counter)
    measuring: bool = False

    def played(self, started: float) -> None:
        if self.measuring:
            self.moves += 1
            self.latencies.append(time.perf_counter() - started)


async def new_table(client: httpx.AsyncClient, game: str) -> tuple[str, list[str]]:
    """A two-seat table of two humans, started: its id and the seats' tokens."""
    return await start_table(client, Plan(game=game, seats=2, humans=2))


async def http_table(
    client: httpx.AsyncClient, game: str, stop: asyncio.Event, tally: Tally, lean: bool = True
) -> None:
    """Play tables over HTTP until ``stop``: each table's moves on a keep-alive connection
    of its own (:class:`lean_http.LeanClient`), or with ``lean`` False through ``client``
    (httpx, as the benchmark did before: its CPU per request was the driver's limit)."""
    mover = lean_http.LeanClient(str(client.base_url).rstrip("/")) if lean else None

    async def send(method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        if mover is not None:
            return await mover.request(method, path, body, token)
        headers = {"Authorization": f"Bearer {token}"}
        answer = await client.request(method, path, json=body, headers=headers)
        return answer.status_code, answer.json()

    try:
        while not stop.is_set():
            table, tokens = await new_table(client, game)
            tally.tables += 1
            await _play_http(table, tokens, send, stop, tally)
    finally:
        if mover is not None:
            await mover.close()


async def _play_http(
    table: str,
    tokens: list[str],
    send: Callable[..., Awaitable[tuple[int, Any]]],
    stop: asyncio.Event,
    tally: Tally,
) -> None:
    """One table's moves until its game ends or ``stop``."""
    legal = [(await send("GET", f"/games/{table}/legal", t))[1] for t in tokens]
    while not stop.is_set():
        seat = next((s for s in (0, 1) if legal[s]["legal_commands"]), None)
        if seat is None:
            return  # the game is over
        started = time.perf_counter()
        command = legal[seat]["legal_commands"][0]
        status, out = await send(
            "POST", f"/games/{table}/commands?legal=true", tokens[seat], command
        )
        if status != 200:
            tally.refused += 1
            tally.errors[str(status)] += 1
            legal[seat] = (await send("GET", f"/games/{table}/legal", tokens[seat]))[1]
            continue
        legal[seat] = out["legal"]
        other = 1 - seat
        path = f"/games/{table}/legal?after_version={out['version']}"
        legal[other] = (await send("GET", path, tokens[other]))[1]
        tally.played(started)


class Seat:
    """One seat's socket: its pending decision (legal commands at a version)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.decision: dict[str, Any] | None = None
        self.results: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.over = False

    async def read(self, changed: asyncio.Event) -> None:
        try:
            async for message in self.ws:
                frame = json.loads(message)
                kind = frame.get("type")
                if kind == "decision":
                    self.decision = frame
                    changed.set()
                elif kind in ("result", "error"):
                    await self.results.put(frame)
                elif kind == "game_ended":
                    self.over = True
                    changed.set()
        finally:
            self.over = True
            changed.set()


async def ws_table(
    client: httpx.AsyncClient, ws_base: str, game: str, stop: asyncio.Event, tally: Tally
) -> None:
    """Play tables over each seat's WebSocket until ``stop``."""
    while not stop.is_set():
        table, tokens = await new_table(client, game)
        tally.tables += 1
        changed = asyncio.Event()
        async with contextlib.AsyncExitStack() as sockets:
            seats = []
            for token in tokens:
                url = f"{ws_base}/games/{table}/ws?token={token}"
                seats.append(Seat(await sockets.enter_async_context(websockets.connect(url))))
            readers = [asyncio.create_task(s.read(changed)) for s in seats]
            try:
                await _play_ws(seats, changed, stop, tally)
            finally:
                for reader in readers:
                    reader.cancel()


async def _play_ws(
    seats: list[Seat], changed: asyncio.Event, stop: asyncio.Event, tally: Tally
) -> None:
    while not stop.is_set():
        seat = next((s for s in seats if s.decision is not None), None)
        if seat is None:
            if any(s.over for s in seats):
                return
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 5)
            continue
        decision, seat.decision = seat.decision, None
        assert decision is not None
        started = time.perf_counter()
        command = {**decision["legal_commands"][0], "command_id": uuid.uuid4().hex}
        await seat.ws.send(json.dumps({"type": "command", "command": command}))
        result = await seat.results.get()
        if result["type"] != "result":
            tally.refused += 1
            tally.errors[result.get("code", "?")] += 1
            continue
        tally.played(started)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


async def closed_loop(
    base: str,
    server: psutil.Process | Apart,
    mode: str,
    tables: int = 20,
    seconds: float = 20,
    game: str = "age_of_discovery",
    warmup_s: float = 3,
    lean: bool = True,
) -> dict[str, Any]:
    """Play ``tables`` tables closed loop for ``seconds`` (after ``warmup_s``): moves/s,
    the server's CPU per move (its process tree and its embedded Redis, apart and in all;
    or each process of the services run :class:`Apart`, and their Redis), its Redis
    commands per move by name, and each move's round trip."""
    tally = Tally()
    stop = asyncio.Event()
    limits = httpx.Limits(max_connections=2 * tables + 10, max_keepalive_connections=2 * tables)
    ws_base = base.replace("http://", "ws://")
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        if mode == "http":
            players = [http_table(client, game, stop, tally, lean) for _ in range(tables)]
        else:
            players = [ws_table(client, ws_base, game, stop, tally) for _ in range(tables)]
        tasks = [asyncio.create_task(p) for p in players]
        await asyncio.sleep(warmup_s)
        before, started = _usage(server), time.perf_counter()
        driver_before = time.process_time()
        tally.measuring, set_up = True, tally.tables
        await asyncio.sleep(seconds)
        tally.measuring, set_up = False, tally.tables - set_up
        after, elapsed = _usage(server), time.perf_counter() - started
        driver_s = time.process_time() - driver_before
        await stopped(tasks, stop)
    moves = max(tally.moves, 1)
    by_process = {
        name: round(1000 * (after.parts[name] - before.parts[name]) / moves, 3)
        for name in after.parts
    }
    lobby = by_process.pop("lobby")
    services = round(sum(v for k, v in by_process.items() if k != "redis"), 3)
    return {
        "system": f"caravel ({mode})",
        "tables": tables,
        "moves": tally.moves,
        "refused": tally.refused,
        "errors": dict(tally.errors),
        "moves_per_second": round(tally.moves / elapsed, 1),
        "tables_set_up": set_up,
        **after.per(before, moves),
        # the lobby process (``caravel up`` itself) and its children (the services) apart
        "lobby_cpu_ms_per_move": lobby,
        "services_cpu_ms_per_move": services,
        **({"cpu_ms_per_move_by_process": by_process} if isinstance(server, Apart) else {}),
        "server_cores_busy": round(
            (after.python_s + after.redis_s - before.python_s - before.redis_s) / elapsed, 2
        ),
        # this driver's own CPU (its one process): a driver near a whole core is the limit
        "driver_cpu_ms_per_move": round(1000 * driver_s / moves, 3),
        "driver_cores_busy": round(driver_s / elapsed, 2),
        "round_trip_ms": {
            name: round(1000 * percentile(tally.latencies, q), 2)
            for name, q in (("p50", 0.5), ("p99", 0.99))
        },
    }


def _usage(server: psutil.Process | Apart) -> Usage:
    return server.usage() if isinstance(server, Apart) else usage(server.pid)


async def stopped(tasks: list[asyncio.Task[Any]], stop: asyncio.Event) -> None:
    """Tell the players to stop, wait for them (10 s at most, then cancel the rest), and
    raise the first error a player ended with."""
    stop.set()
    done, pending = await asyncio.wait(tasks, timeout=10)
    for task in pending:
        task.cancel()
    for task in done:
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
