"""``caravel bench capacity``: how many live tables one ``caravel up`` carries at a human pace.

Each table has ``humans`` seats played by this driver like a person would (joined over HTTP,
its WebSocket open, a move sent as a ``command`` frame on it after a think time drawn from
``think``) and bots in the others. The figure that matters is the time from a move sent to
its event reaching a seat's WebSocket (the mover's own with one human; the other human's
with two): its p99 at each number of tables, with every refused move (an ``error`` frame) and
every lost one (no answer) counted. Memory: the server's resident memory (its whole process
tree) before the tables, with them, and with one more spectator socket per table.

The same driver, with two humans per table and the think time drawn to offer a given rate,
is the move → other seat's WebSocket latency benchmark (``benchmarks/peers/latency.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import httpx
import websockets

from services.children import terminate
from services.runtime import tune_collector
from services.usage import percentile, server_rss_bytes, usage
from shared.contracts import dump_json, load_json

ANSWER_S = 10.0  # a move with no answer in this long is lost


@dataclass
class Plan:
    """What each table is: its game, seats, human seats (the first ones; the rest bots of
    ``bot``), and the think time range of its humans, in seconds."""

    game: str = "age_of_discovery"
    seats: int = 4
    humans: int = 1
    bot: str = "greedy"
    think: tuple[float, float] = (2.0, 10.0)
    watch_other: bool = False  # time a move to the other human's socket, not the mover's


class Timed(NamedTuple):
    """One measured move's moments on this driver's clock (``time.perf_counter``): sent,
    its answer (``result`` frame) read, its first event read, and when the engine began
    the batch that decided it (the event's ``recorded_at``, wall clock, made this clock's)."""

    command_id: str
    sent: float
    answered: float
    arrived: float
    decided: float


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    timed: list[Timed] = field(default_factory=list)
    moves: int = 0
    refused: int = 0
    lost: int = 0
    measuring: bool = False
    lags: list[float] = field(default_factory=list)  # the driver's loop: late wake-ups, s


LAG_TICK_S = 0.05


async def _watch_lag(tally: Tally, stop: asyncio.Event) -> None:
    """How late this driver's own loop wakes a sleeper, while measuring: a move's arrival
    is timed on this loop, so a late one here is latency the server did not cause."""
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(LAG_TICK_S)
        if tally.measuring:
            tally.lags.append(time.perf_counter() - asked - LAG_TICK_S)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(port: int, prefix: str = "cvbench", **settings: str) -> dict[str, str]:
    """The environment of a benchmark's server: this one's without its CARAVEL_ settings, a
    data folder, port and key prefix of its own, and the per-client limits lifted (every
    simulated player comes from this one address); ``settings`` as CARAVEL_<NAME>."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")},
        "CARAVEL_DATA_DIR": tempfile.mkdtemp(prefix=f"{prefix}-"),
        "CARAVEL_HTTP_PORT": str(port),
        "CARAVEL_KEY_PREFIX": f"{prefix}-{uuid.uuid4().hex[:8]}",
        "CARAVEL_LOG_LEVEL": "WARNING",
        "CARAVEL_WS_MAX_PER_CLIENT": "1000000",
        "CARAVEL_WS_MAX_TOTAL": "1000000",
        **{
            f"CARAVEL_{kind}_{what}": "1000000"
            for kind in ("JOIN", "COMMAND", "SOCKET")
            for what in ("RATE", "BURST")
        },
        **{f"CARAVEL_{name.upper()}": value for name, value in settings.items()},
    }


@contextlib.contextmanager
def server(
    processes: int | None = None,
    tree: str | None = None,
    python: str = sys.executable,
    **settings: str,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ``caravel up`` (of the checkout at ``tree``, else this one) on a free port, of
    ``processes`` processes (``CARAVEL_PROCESSES``; None: its default), with ``settings``
    as CARAVEL_<NAME>: its base URL and process (the parent of the others:
    ``services.usage`` counts them all)."""
    port = free_port()
    chosen = {} if processes is None else {"processes": str(processes)}
    env = server_env(port, "cvcap", metrics_port="0", **chosen, **settings)
    if tree is not None:
        env["PYTHONPATH"] = tree
    process = subprocess.Popen(
        [python, "-m", "services.cli", "up"], env=env, cwd=tree, stdout=subprocess.DEVNULL
    )
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        terminate([process], 60)


async def wait_ready(base: str, seconds: float = 120) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=5) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if (await client.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{base} did not become ready")


def connect(url: str) -> Any:
    """A socket as a browser opens one: no keepalive pings of its own (the server pings,
    and a browser only answers), which at thousands of sockets cost the driver and the
    lobby a frame each way per socket every 20 s."""
    return websockets.connect(url, max_size=None, ping_interval=None, close_timeout=2)


class Arrival(NamedTuple):
    """When an event reached a socket (``time.perf_counter``), and its ``recorded_at``."""

    at: float
    recorded_at: str | None


class Human:
    """One human seat's socket: its decisions, the answers to its moves, and when each
    version reached it."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.decisions: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.waiting: dict[int, asyncio.Future[Arrival]] = {}  # a version after -> its arrival
        self.moves = 0  # the moves seen, every seat's: runs of events of one command
        self.dropped = False  # closed by the server for another reason than its game's end
        self._cause: str | None = None

    async def read(self) -> None:
        try:
            async for message in self.ws:
                frame = load_json(message)
                kind = frame.get("type")
                if kind == "decision":
                    self.decisions.put_nowait(frame)
                elif kind in ("result", "error"):
                    self.answers.put_nowait(frame)
                else:
                    self._arrived(frame["version"], time.perf_counter(), frame)
                    self._count(frame.get("causation_id"))
        except websockets.ConnectionClosedError:
            pass  # closed with another code than 1000: counted below
        finally:
            self.dropped = self.ws.close_reason != "game_over"

    def _arrived(self, version: int, at: float, frame: dict[str, Any]) -> None:
        for after in [a for a in self.waiting if version > a]:
            future = self.waiting.pop(after)
            if not future.done():
                future.set_result(Arrival(at, frame.get("recorded_at")))

    def _count(self, cause: str | None) -> None:
        """A move seen: an event of another command than the last event's."""
        if cause is not None and cause != self._cause:
            self._cause = cause
            self.moves += 1

    def expect(self, after: int) -> asyncio.Future[Arrival]:
        """When the first event after version ``after`` reaches this socket."""
        future: asyncio.Future[Arrival] = asyncio.get_running_loop().create_future()
        self.waiting[after] = future
        return future


async def start_table(client: httpx.AsyncClient, plan: Plan) -> tuple[str, list[str]]:
    """A table of ``plan`` with its humans joined, started: its id and their tokens."""
    bots = {str(s): plan.bot for s in range(plan.humans, plan.seats)}
    body = {"game": plan.game, "seats": plan.seats, "bots": bots, "deadline_s": 86400}
    table = (await client.post("/tables", json=body)).json()["id"]
    tokens = []
    for i in range(plan.humans):
        joined = await client.post(f"/tables/{table}/join", json={"name": f"h{i}"})
        tokens.append(joined.json()["token"])
    started = await client.post(
        f"/tables/{table}/start", headers={"Authorization": f"Bearer {tokens[0]}"}
    )
    started.raise_for_status()
    return table, tokens


async def _play(
    humans: list[Human], plan: Plan, rng: random.Random, tally: Tally, stop: asyncio.Event
) -> None:
    async def seat(i: int) -> None:
        me, other = humans[i], humans[(i + 1) % len(humans)]
        watched = other if plan.watch_other else me
        while True:  # until cancelled once ``stop`` is set
            decision = await me.decisions.get()
            while not me.decisions.empty():  # the newest one only
                decision = me.decisions.get_nowait()
            await asyncio.sleep(rng.uniform(*plan.think))
            if stop.is_set():
                return
            measuring = tally.measuring
            arrival = watched.expect(decision["version"])
            sent = time.perf_counter()
            command = {**rng.choice(decision["legal_commands"]), "command_id": uuid.uuid4().hex}
            await me.ws.send(dump_json({"type": "command", "command": command}))
            try:
                async with asyncio.timeout(ANSWER_S):  # no task made per wait, as wait_for
                    answer = await me.answers.get()
            except TimeoutError:
                tally.lost += measuring
                continue
            answered = time.perf_counter()
            if answer["type"] != "result":
                tally.refused += measuring
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ANSWER_S):
                    at, recorded_at = await arrival
                if measuring:
                    tally.moves += 1
                    tally.latencies.append(at - sent)
                    decided = _on_this_clock(recorded_at)
                    tally.timed.append(Timed(command["command_id"], sent, answered, at, decided))

    await asyncio.gather(*(seat(i) for i in range(len(humans))))


def _on_this_clock(recorded_at: str | None) -> float:
    """An event's ``recorded_at`` (ISO, wall clock: the engine's batch began then) on
    ``time.perf_counter``'s scale (nan if the event has none)."""
    if recorded_at is None:
        return math.nan
    return datetime.fromisoformat(recorded_at).timestamp() - (time.time() - time.perf_counter())


def hops(timed: list[Timed]) -> dict[str, Any]:
    """Where a move's time went, by hop, p50 and p99 in ms: ``to_engine`` from its frame
    sent to the engine's batch that decided it (the lobby's admission, the command's
    stream, the engine's read and linger, its process's loop), ``engine_to_socket`` from
    there to its event on the socket (the decision, the append, the lobby's fan-out and
    socket write, this driver's loop), and ``answer`` from the frame to its ``result``;
    ``tail``: the same hops' p50 among the moves at or past the p99 of the whole."""
    if not timed:
        return {}
    parts = {
        "to_engine": [t.decided - t.sent for t in timed],
        "engine_to_socket": [t.arrived - t.decided for t in timed],
        "answer": [t.answered - t.sent for t in timed],
    }
    out: dict[str, Any] = {
        name: {"p50": pct(sorted(v), 0.5), "p99": pct(sorted(v), 0.99)} for name, v in parts.items()
    }
    whole = sorted(t.arrived - t.sent for t in timed)
    slow = [i for i, t in enumerate(timed) if t.arrived - t.sent >= percentile(whole, 0.99)]
    out["tail"] = {
        "moves": len(slow),
        **{name: pct(sorted(v[i] for i in slow), 0.5) for name, v in parts.items()},
    }
    return out


async def live_tables(
    base: str, pid: int, tables: int, seconds: float, plan: Plan, seed: int = 1
) -> dict[str, Any]:
    """Play ``tables`` tables of ``plan`` for ``seconds`` once all are set up: move
    latency percentiles, refused and lost moves, the server's CPU (its embedded Redis
    included; per move and Redis commands per move where every seat is timed), and memory
    per table and per socket. This process's collector is tuned as a server's while the
    tables play (:func:`tune_collector`): a move's arrival is timed on its loop, and with
    CPython's defaults a full collection of thousands of open sockets' objects stopped it
    for 0.1-0.2 s, counted as the server's latency."""
    rng = random.Random(seed)
    tally, stop = Tally(), asyncio.Event()
    ws_base = base.replace("http://", "ws://")
    limits = httpx.Limits(max_connections=64)
    timeout = httpx.Timeout(120, pool=None)  # thousands of set-ups queue for 64 connections
    rss_before = server_rss_bytes(pid)
    opened: list[Any] = []
    async with httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits) as client:
        setups = [asyncio.create_task(start_table(client, plan)) for _ in range(tables)]
        made = await asyncio.gather(*setups)
        humans = []
        for table, tokens in made:
            seated = []
            for token in tokens:
                url = f"{ws_base}/games/{table}/ws?token={token}"
                opened.append(ws := await connect(url))
                seated.append(Human(ws))
            humans.append(seated)
        collector = gc.get_threshold()
        tune_collector()  # its sockets, all open now, out of every later collection
        readers = [asyncio.create_task(h.read()) for seated in humans for h in seated]
        players = [
            asyncio.create_task(_play(seated, plan, random.Random(rng.random()), tally, stop))
            for seated in humans
        ]
        lag = asyncio.create_task(_watch_lag(tally, stop))
        await asyncio.sleep(plan.think[1])  # every table past its first move
        rss_tables = server_rss_bytes(pid)
        tally.measuring = True
        started, used, driver = time.perf_counter(), usage(pid), time.process_time()
        seen = sum(h.moves for seated in humans for h in seated[:1])
        dropped = sum(h.dropped for seated in humans for h in seated)
        await asyncio.sleep(seconds)
        tally.measuring = False
        seen = sum(h.moves for seated in humans for h in seated[:1]) - seen
        dropped = sum(h.dropped for seated in humans for h in seated) - dropped
        elapsed, usage_after = time.perf_counter() - started, usage(pid)
        driver = time.process_time() - driver
        cost = usage_after.per(used, tally.moves)
        for table, _ in made:  # a spectator each
            opened.append(await connect(f"{ws_base}/games/{table}/ws"))
        await asyncio.sleep(1)
        rss_sockets = server_rss_bytes(pid)
        stop.set()
        for task in players:  # a seat waits for its next decision with no timeout
            task.cancel()
        await asyncio.gather(*players, lag, return_exceptions=True)
        for task in readers:
            task.cancel()
        # All at once: one by one, each socket whose frames no one read any more (paused
        # by websockets' flow control, so it never sees the server's close) took its close
        # timeout, thousands of them in turn.
        await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    gc.unfreeze()
    gc.set_threshold(*collector)
    ordered, lags = sorted(tally.latencies), sorted(tally.lags)

    return {
        "tables": tables,
        "seats": plan.seats,
        "humans_per_table": plan.humans,
        "moves": tally.moves,
        "moves_per_second": round(tally.moves / elapsed, 1),
        "refused": tally.refused,
        "lost": tally.lost,
        "dropped_sockets": dropped,  # closed by the server while measuring, not at a game's end
        "latency_ms": {"p50": pct(ordered, 0.5), "p99": pct(ordered, 0.99)} if ordered else None,
        "hops_ms": hops(tally.timed),
        "server_cores_busy": round(
            cost["server_cpu_ms_per_move"] * tally.moves / 1000 / elapsed, 2
        ),
        **(cost if plan.humans == plan.seats else {}),  # with bots, not all moves are timed
        **per_table_second(usage_after.per(used, round(tables * elapsed))),
        "all_moves": seen,  # every seat's, bots' included, as the first human's socket saw
        "cpu_ms_per_move": {
            part: value
            for part, value in usage_after.per(used, seen).items()
            if part.endswith("cpu_ms_per_move")
        },
        "driver_cores_busy": round(driver / elapsed, 2),
        "driver_loop_lag_ms": {"p50": pct(lags, 0.5), "p99": pct(lags, 0.99)} if lags else None,
        "memory_per_table_kb": round((rss_tables - rss_before) / tables / 1024, 1),
        "memory_per_socket_kb": round((rss_sockets - rss_tables) / tables / 1024, 1),
    }


def pct(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of ``ordered`` seconds, in ms."""
    return round(1000 * percentile(ordered, q), 2)


def per_table_second(cost: dict[str, Any]) -> dict[str, Any]:
    """The server's CPU per live table and second (``cost``: :meth:`Usage.per` with table
    seconds for units), whole and by part (the lobby process, the services child, Redis),
    and its Redis commands per table-second: the figure that says how many tables the
    machine carries, bots' moves and idle work included."""
    parts = ("server", "lobby", "services", "redis")
    return {
        "cpu_ms_per_table_second": {p: cost[f"{p}_cpu_ms_per_move"] for p in parts},
        "redis_commands_per_table_second": cost["redis_commands_per_move"],
        "redis_commands_by_name_per_table_second": cost["redis_commands_by_name"],
    }


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs (a benchmark's ``--setting``, e.g. ``embedded_fsync=everysec``)
    as :func:`server_env`'s settings; a pair without ``=`` is refused, naming it."""
    bad = [pair for pair in pairs if "=" not in pair]
    if bad:
        raise ValueError(f"a setting is NAME=VALUE, not {bad[0]!r}")
    return {name.strip(): value for name, value in (pair.split("=", 1) for pair in pairs)}


def capacity(
    levels: list[int],
    seconds: float,
    processes: int | None = None,
    p99_ms: float = 100.0,
    seed: int = 1,
    settings: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Each number of tables in ``levels`` on a fresh server (with ``settings`` as
    CARAVEL_<NAME>); the largest whose p99 stays within ``p99_ms`` with no refused or lost
    move and no socket dropped."""
    runs = []
    for tables in levels:
        with server(processes, **(settings or {})) as (base, process):
            asyncio.run(wait_ready(base))
            run = asyncio.run(live_tables(base, process.pid, tables, seconds, Plan(), seed))
        run["ok"] = bool(
            run["latency_ms"]
            and run["latency_ms"]["p99"] <= p99_ms
            and not run["refused"]
            and not run["lost"]
            and not run["dropped_sockets"]
        )
        runs.append(run)
        print(dump_json(run), file=sys.stderr, flush=True)
    passed = [r["tables"] for r in runs if r["ok"]]
    largest = max(passed, default=0)
    chosen = settings or {}
    return {
        "processes": processes,
        "settings": chosen,
        "p99_limit_ms": p99_ms,
        "largest_ok": largest,
        "runs": runs,
    }
