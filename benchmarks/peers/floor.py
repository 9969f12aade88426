"""Benchmark: the floor of Caravel's move path in Python, a skeleton with no game logic.

    python benchmarks/peers/floor.py --tables 20 --seconds 15 --rounds 2
        [--variants full,full-redispy,answer-from-events,no-engine,no-redis]
        [--parse model|json]
        [--bgio] [--caravel [--caravel-mode ws|http] [--processes N]] [--profile DIR] [--json]
    python benchmarks/peers/floor.py top DIR/full.txt   # a profile's top frames

What is the least a move can cost on Caravel's architecture in this stack (uvicorn, Redis
through hiredis, asyncio)? The floor server keeps the steps the architecture mandates per
move and does each the cheapest way found, with no game, no seat table, no views:

1. uvicorn (uvloop, httptools, its ``websockets`` protocol, no compression: Caravel's
   lobby settings) and a pure ASGI app, one WebSocket per seat
   (``/t/{table}/{seat}``); a move is a small JSON ``command`` frame, parsed by a minimal
   pydantic model (``--parse model``, what Caravel must do at least for bad input) or by
   pydantic-core's ``from_json`` with hand checks (``--parse json``).
2. The durable append: one Redis round trip that appends the command to a stream
   (``XADD``) and waits for its result (``BLMOVE`` of a per-request list), both written
   at once on one connection (a blocking wait holds its connection: a free list of them).
3. An engine process, the single writer: ``XREADGROUP`` a batch of commands, decide
   trivially (the table's next version), and per batch one pipelined write of an
   ``EVALSHA`` per command (version check, ``XADD`` of the event, ``LPUSH`` + ``PEXPIRE``
   of the result) and one ``XACK`` of the batch.
4. The lobby answers the mover's frame with the result, and a follower (``XREAD BLOCK`` of
   the event stream, batched) pushes each event to the other seat's socket.

Redis is spoken through a bare asyncio protocol over hiredis (``pack_command`` and its
reader): no redis-py pool, pipeline or retry layers. Variants, to show what each part costs:

- ``full``: steps 1-4.
- ``full-redispy``: as ``full``, the lobby's append and wait through redis-py's pipeline
  (as Caravel's ``CommandSender.execute``): what the client library adds.
- ``answer-from-events``: no ``BLMOVE``; the lobby writes the ``XADD`` on one shared
  connection (pipelined with every other request's) and the follower answers the mover
  too, from the event (whose entry names the command).
- ``no-engine``: the lobby appends the event itself (the same script, one ``EVALSHA`` on
  the shared connection) and answers when it returns; the follower pushes to the other seat.
- ``no-redis``: in memory: parse, answer the mover, push to the other seat. The bare
  uvicorn + WebSocket cost of a move.

Each round runs every variant (and with ``--bgio`` boardgame.io, with ``--caravel``
``caravel up`` over WebSocket moves, from ``run.py``) one after the other, so that they meet
the same load. Closed loop as ``run.py``: ``--tables`` two-seat tables, one move in flight
per table (the mover waits for its result and for the other seat to see the event, then the
other seat moves). Printed: moves/s and server CPU per move (user + system from ``/proc``:
the lobby and the engine apart, and the private ``redis-server`` apart), Redis commands per
move (``INFO commandstats``), round trips. The floor's Redis is a private ``redis-server`` on
a unix socket with no persistence (``caravel up``'s embedded one appends to its AOF,
synced before each reply, and snapshots; the forked child is counted in neither). With
``--profile DIR``, a last round per floor variant runs ``py-spy record`` on the lobby (its
figures are left out of the summary).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import hiredis
from pydantic import BaseModel
from pydantic_core import from_json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its modules, beside it

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))
VARIANTS = ("full", "full-redispy", "answer-from-events", "no-engine", "no-redis")
COMMANDS, EVENTS, VERSIONS, GROUP = "floor:commands", "floor:events", "floor:versions", "engine"

# KEYS: versions hash, event stream, result list ('' : none). ARGV: table, expected version,
# seat, body, command id. The version check and the event's append in one atomic step; the
# result pushed (and expiring) where a BLMOVE waits for it.
APPEND = """
local v = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if v ~= tonumber(ARGV[2]) then
  v = -1
else
  v = v + 1
  redis.call('HSET', KEYS[1], ARGV[1], v)
  redis.call('XADD', KEYS[2], '*', 't', ARGV[1], 'v', v, 's', ARGV[3], 'c', ARGV[5], 'e', ARGV[4])
end
if KEYS[3] ~= '' then
  redis.call('LPUSH', KEYS[3], v)
  redis.call('PEXPIRE', KEYS[3], 60000)
end
return v
"""


# --- Redis: a bare asyncio protocol over hiredis ------------------------------------------


class Conn(asyncio.Protocol):
    """One Redis connection: commands written at once, replies matched in order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            future = self.waiting.popleft()
            if future.cancelled():
                continue
            if isinstance(reply, hiredis.ReplyError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(ConnectionError("redis connection lost"))

    def send(self, *commands: tuple[Any, ...]) -> list[asyncio.Future[Any]]:
        """Write ``commands`` in one write; their replies' futures."""
        assert self.transport is not None
        self.transport.write(b"".join([hiredis.pack_command(c) for c in commands]))
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        self.waiting.extend(futures)
        return futures

    async def call(self, *command: Any) -> Any:
        return await self.send(command)[0]


async def connect(path: str) -> Conn:
    _, conn = await asyncio.get_running_loop().create_unix_connection(Conn, path)
    return conn


# --- the lobby: pure ASGI over uvicorn ---------------------------------------------------


class Move(BaseModel):
    kind: str
    n: int


class Frame(BaseModel):
    """The least a move frame's check can be: its type, its command's shape, its id."""

    type: Literal["command"]
    command: Move
    command_id: str


def parse_model(text: str) -> str:
    return Frame.model_validate_json(text).command_id


def parse_json(text: str) -> str:
    frame = from_json(text)
    if not isinstance(frame, dict) or frame.get("type") != "command":
        raise ValueError("not a command frame")
    command_id, command = frame.get("command_id"), frame.get("command")
    if not isinstance(command_id, str) or not isinstance(command, dict):
        raise ValueError("no command")
    return command_id


class Lobby:
    """The floor lobby: sockets by (table, seat), and its Redis connections."""

    def __init__(self, variant: str, parse: str, redis_path: str) -> None:
        self.variant = variant
        self.parse = parse_model if parse == "model" else parse_json
        self.redis_path = redis_path
        self.sockets: dict[tuple[str, int], Any] = {}
        self.versions: dict[str, int] = collections.defaultdict(int)  # no-engine: the writer
        self.free: list[Conn] = []  # full: connections a BLMOVE may hold
        self.shared: Conn | None = None
        self.pending: dict[str, Any] = {}  # answer-from-events: command id -> (send, table)
        self.sha = ""
        self.client: Any = None  # full-redispy: redis-py's client

    async def start(self) -> None:
        if self.variant == "no-redis":
            return
        self.shared = await connect(self.redis_path)
        if self.variant == "full-redispy":
            import redis.asyncio

            self.client = redis.asyncio.Redis(unix_socket_path=self.redis_path)
        self.sha = await self.shared.call("SCRIPT", "LOAD", APPEND)
        last = await self.shared.call("XREVRANGE", EVENTS, "+", "-", "COUNT", 1)
        asyncio.get_running_loop().create_task(self.follow(last[0][0] if last else b"0-0"))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()  # lifespan.startup
            await self.start()
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "websocket":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        _, _, table, seat_text = scope["path"].split("/")
        seat = int(seat_text)
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        self.sockets[(table, seat)] = send
        try:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return
                await self.move(table, seat, message.get("text") or message["bytes"], send)
        finally:
            self.sockets.pop((table, seat), None)

    async def move(self, table: str, seat: int, text: str, send: Any) -> None:
        try:
            command_id = self.parse(text)
        except ValueError as error:
            await send({"type": "websocket.send", "text": f'{{"type":"error","code":"{error}"}}'})
            return
        if self.variant == "no-redis":
            self.versions[table] += 1
            version = self.versions[table]
            await send({"type": "websocket.send", "text": _result(command_id, version)})
            other = self.sockets.get((table, 1 - seat))
            if other is not None:
                await other({"type": "websocket.send", "text": _event(table, version, text)})
        elif self.variant == "full":
            await self.via_engine(table, seat, text, command_id, send)
        elif self.variant == "full-redispy":
            await self.via_redispy(table, seat, text, command_id, send)
        elif self.variant == "answer-from-events":
            assert self.shared is not None
            self.pending[command_id] = send
            self.shared.send(_command(table, seat, text, command_id))
        else:  # no-engine
            assert self.shared is not None
            expected = self.versions[table]
            self.versions[table] = expected + 1
            append = ("EVALSHA", self.sha, 3, VERSIONS, EVENTS, "", table, expected)
            version = await self.shared.call(*append, seat, text, command_id)
            await send({"type": "websocket.send", "text": _result(command_id, version)})

    async def via_engine(
        self, table: str, seat: int, text: str, command_id: str, send: Any
    ) -> None:
        conn = self.free.pop() if self.free else await connect(self.redis_path)
        key = f"floor:result:{command_id}"
        try:
            wait = ("BLMOVE", key, key, "LEFT", "LEFT", 5)
            _, answer = conn.send(_command(table, seat, text, command_id), wait)
            version = int(await answer)
        finally:
            self.free.append(conn)
        await send({"type": "websocket.send", "text": _result(command_id, version)})

    async def via_redispy(
        self, table: str, seat: int, text: str, command_id: str, send: Any
    ) -> None:
        """As :meth:`via_engine`, through redis-py's pipeline (as Caravel's
        ``CommandSender.execute``): what the client library adds."""
        key = f"floor:result:{command_id}"
        fields = {"t": table, "s": seat, "c": command_id, "b": text}
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xadd(COMMANDS, fields)
            pipe.blmove(key, key, 5, "LEFT", "LEFT")
            _, answer = await pipe.execute()
        await send({"type": "websocket.send", "text": _result(command_id, int(answer))})

    async def follow(self, last: bytes) -> None:
        """Push each event to the other seat (and, answering from events, to the mover)."""
        reader = await connect(self.redis_path)
        while True:
            reply = await reader.call(
                "XREAD", "COUNT", 1024, "BLOCK", 1000, "STREAMS", EVENTS, last
            )
            if not reply:
                continue
            for entry, fields in reply[0][1]:
                last = entry
                # fields: t table v version s seat c command id e body
                table, version, seat = fields[1].decode(), int(fields[3]), int(fields[5])
                mover = self.pending.pop(fields[7].decode(), None)
                if mover is not None:
                    text = _result(fields[7].decode(), version)
                    await mover({"type": "websocket.send", "text": text})
                other = self.sockets.get((table, 1 - seat))
                if other is not None:
                    text = _event(table, version, fields[9].decode())
                    await other({"type": "websocket.send", "text": text})


def _command(table: str, seat: int, text: str, command_id: str) -> tuple[Any, ...]:
    return ("XADD", COMMANDS, "*", "t", table, "s", seat, "c", command_id, "b", text)


def _result(command_id: str, version: int) -> str:
    return f'{{"type":"result","command_id":"{command_id}","version":{version}}}'


def _event(table: str, version: int, body: str) -> str:
    return f'{{"type":"event","table":"{table}","version":{version},"command":{body}}}'


def serve(variant: str, parse: str, redis_path: str, port: int) -> None:
    import uvicorn

    lobby = Lobby(variant, parse, redis_path)
    config = uvicorn.Config(
        lobby, port=port, log_level="warning", ws_per_message_deflate=False, lifespan="on"
    )
    uvicorn.Server(config).run()


# --- the engine: the single writer ------------------------------------------------------


async def engine(redis_path: str, answer: bool) -> None:
    """Read command batches, decide (the next version), append and (``answer``: onto the
    command's result list) answer, per batch."""
    conn = await connect(redis_path)
    sha = await conn.call("SCRIPT", "LOAD", APPEND)
    with contextlib.suppress(hiredis.ReplyError):
        await conn.call("XGROUP", "CREATE", COMMANDS, GROUP, "0", "MKSTREAM")
    versions: dict[bytes, int] = collections.defaultdict(int)
    read = ("XREADGROUP", "GROUP", GROUP, "e", "COUNT", 512, "BLOCK", 1000)
    while True:
        reply = await conn.call(*read, "STREAMS", COMMANDS, ">")
        if not reply:
            continue
        writes: list[tuple[Any, ...]] = []
        entries = reply[0][1]
        for _, fields in entries:  # t table s seat c command id b body
            table, command_id = fields[1], fields[5]
            expected = versions[table]
            versions[table] = expected + 1
            result = b"floor:result:" + command_id if answer else b""
            append = ("EVALSHA", sha, 3, VERSIONS, EVENTS, result, table, expected)
            writes.append((*append, fields[3], fields[7], command_id))
        writes.append(("XACK", COMMANDS, GROUP, *[e for e, _ in entries]))
        for future in await asyncio.gather(*conn.send(*writes), return_exceptions=True):
            if isinstance(future, Exception):
                raise future


# --- the driver -------------------------------------------------------------------------


@contextlib.contextmanager
def redis_server() -> Iterator[tuple[str, int]]:
    """A private redis-server on a unix socket, no persistence: its socket and pid."""
    folder = tempfile.mkdtemp(prefix="caravel-floor-")
    path = os.path.join(folder, "redis.sock")
    process = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", path, "--save", "", "--appendonly", "no"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        yield path, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def floor_server(variant: str, parse: str) -> Iterator[tuple[int, dict[str, int], str]]:
    """The floor's processes for ``variant``: its port, pids (lobby, engine, redis) and
    Redis socket."""
    from services.capacity import free_port

    with contextlib.ExitStack() as stack:
        path, redis_pid = stack.enter_context(redis_server())
        pids = {"redis": redis_pid}
        me = [sys.executable, os.path.abspath(__file__)]
        processes = []
        if variant in ("full", "full-redispy", "answer-from-events"):
            answer = "none" if variant == "answer-from-events" else "list"
            processes.append(subprocess.Popen([*me, "engine", "--redis", path, "--answer", answer]))
            pids["engine"] = processes[-1].pid
        port = free_port()
        lobby = [*me, "serve", "--variant", variant, "--parse", parse, "--redis", path]
        processes.append(subprocess.Popen([*lobby, "--port", str(port)]))
        pids["lobby"] = processes[-1].pid
        try:
            _wait_port(port)
            yield port, pids, path
        finally:
            from services.children import terminate  # not in the floor's own processes

            terminate(processes, 10)


def _wait_port(port: int, seconds: float = 30) -> None:
    import socket

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the floor lobby did not listen on {port}")


async def table(port: int, name: str, stop: asyncio.Event, tally: Any) -> None:
    """One two-seat table, closed loop: the mover waits for its result and for the other
    seat to receive the event, then the other seat moves."""
    import websockets

    base = f"ws://127.0.0.1:{port}/t/{name}"
    async with websockets.connect(f"{base}/0") as a, websockets.connect(f"{base}/1") as b:
        seats, mover, n = (a, b), 0, 0
        while not stop.is_set():
            command_id = uuid.uuid4().hex
            frame = {
                "type": "command",
                "command": {"kind": "move", "n": n},
                "command_id": command_id,
            }
            started = time.perf_counter()
            await seats[mover].send(json.dumps(frame))
            result = json.loads(await seats[mover].recv())
            event = json.loads(await seats[1 - mover].recv())
            if result.get("type") != "result" or event.get("type") != "event":
                tally.refused += 1
                tally.errors[str(result.get("code", result.get("type")))] += 1
                return
            tally.played(started)
            mover, n = 1 - mover, n + 1


def commandstats(path: str) -> collections.Counter[str]:
    import redis

    client = redis.Redis(unix_socket_path=path)
    try:
        stats: Any = client.info("commandstats")
    finally:
        client.close()
    return collections.Counter(
        {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    )


async def closed_loop(
    port: int,
    pids: dict[str, int],
    redis_path: str,
    tables: int,
    seconds: float,
    warmup_s: float,
    profile: str | None = None,
) -> dict[str, Any]:
    from caravel_loop import Tally, percentile, stopped

    from services.usage import cpu_s

    tally, stop = Tally(), asyncio.Event()
    prefix = uuid.uuid4().hex[:6]
    tasks = [asyncio.create_task(table(port, f"{prefix}{i}", stop, tally)) for i in range(tables)]
    await asyncio.sleep(warmup_s)
    spy = None
    if profile:
        spy = subprocess.Popen(
            [
                os.path.join(os.path.dirname(sys.executable), "py-spy"),
                "record",
                "--pid",
                str(pids["lobby"]),
                "--duration",
                str(int(seconds)),
                "--rate",
                "200",
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                profile,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    calls0 = commandstats(redis_path)
    before = {name: cpu_s([pid]) for name, pid in pids.items()}
    started = time.perf_counter()
    tally.measuring = True
    await asyncio.sleep(seconds)
    tally.measuring = False
    after = {name: cpu_s([pid]) for name, pid in pids.items()}
    elapsed = time.perf_counter() - started
    calls = commandstats(redis_path) - calls0
    await stopped(tasks, stop)
    if spy is not None:
        spy.wait(timeout=60)
    moves = max(tally.moves, 1)
    spent = {name: after[name] - before[name] for name in pids}
    python = sum(v for k, v in spent.items() if k != "redis")
    return {
        "tables": tables,
        "moves": tally.moves,
        "refused": tally.refused,
        "errors": dict(tally.errors),
        "moves_per_second": round(tally.moves / elapsed, 1),
        "server_cpu_ms_per_move": round(1000 * (python + spent["redis"]) / moves, 3),
        "python_cpu_ms_per_move": round(1000 * python / moves, 3),
        "redis_cpu_ms_per_move": round(1000 * spent["redis"] / moves, 3),
        **{
            f"{k}_cpu_ms_per_move": round(1000 * v / moves, 3)
            for k, v in spent.items()
            if k in ("lobby", "engine")
        },
        "redis_commands_per_move": round(calls.total() / moves, 2),
        "redis_commands_by_name": {
            name: round(n / moves, 2) for name, n in calls.most_common() if n / moves >= 0.01
        },
        "server_cores_busy": round((python + spent["redis"]) / elapsed, 2),
        "round_trip_ms": {
            name: round(1000 * percentile(tally.latencies, q), 2)
            for name, q in (("p50", 0.5), ("p99", 0.99))
        },
    }


def floor_round(
    variant: str, args: argparse.Namespace, profile: str | None = None
) -> dict[str, Any]:
    with floor_server(variant, args.parse) as (port, pids, path):
        result = asyncio.run(
            closed_loop(port, pids, path, args.tables, args.seconds, args.warmup, profile)
        )
    result["system"] = f"floor {variant} ({args.parse})" + (" profiled" if profile else "")
    return result


def spy_top(path: str, lines: int) -> None:
    """The frames of a ``py-spy record --format raw`` profile by their share of samples,
    as leaf (self) and anywhere on the stack (inclusive). A leaf ``Runner.run`` is time in
    uvloop's C loop (waiting in epoll, or its own C work): shares are also given of the
    other samples."""
    own: collections.Counter[str] = collections.Counter()
    anywhere: collections.Counter[str] = collections.Counter()
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            frames = [_frame(frame) for frame in stack.split(";") if " (" in frame]
            if frames and count.isdigit():
                own[frames[-1]] += int(count)
                anywhere.update(dict.fromkeys(frames, int(count)))
    total = own.total()
    busy = total - sum(n for frame, n in own.items() if frame.startswith("Runner.run "))
    print(f"{total} samples, {busy} outside uvloop's loop")
    chain = max(anywhere.values(), default=0)  # the entry frames every stack shares
    for title, counts in (("self", own), ("inclusive", anywhere)):
        print(f"-- {title}: % of all, % of those outside the loop --")
        rows = [(f, n) for f, n in counts.most_common() if title == "self" or n < chain]
        for frame, n in rows[:lines]:
            outside = "" if frame.startswith("Runner.run ") else f"{100 * n / max(busy, 1):5.1f}"
            print(f"{100 * n / total:5.1f} {outside:>5}  {frame}")


def _frame(frame: str) -> str:
    """A frame without the site-packages and standard library prefixes of its file."""
    name, _, where = frame.partition(" (")
    for marker in ("site-packages/", "python3.11/", "benchmarks/peers/"):
        where = where.split(marker, 1)[-1]
    return f"{name} ({where.rstrip(')')})"


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role")
    lobby = sub.add_parser("serve")
    lobby.add_argument("--variant", choices=VARIANTS, required=True)
    lobby.add_argument("--parse", choices=("model", "json"), default="model")
    lobby.add_argument("--redis", required=True)
    lobby.add_argument("--port", type=int, required=True)
    top = sub.add_parser("top", help="self and inclusive shares of a raw py-spy profile")
    top.add_argument("profile")
    top.add_argument("--lines", type=int, default=20)
    writer = sub.add_parser("engine")
    writer.add_argument("--redis", required=True)
    writer.add_argument("--answer", choices=("list", "none"), default="list")
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--parse", choices=("model", "json"), default="model")
    parser.add_argument("--bgio", action="store_true", help="boardgame.io in each round")
    parser.add_argument("--caravel", action="store_true", help="caravel up in each round")
    parser.add_argument(
        "--caravel-mode", choices=("ws", "http"), default="ws", help="caravel's moves (run.py)"
    )
    parser.add_argument("--processes", type=int, default=None, help="caravel's CARAVEL_PROCESSES")
    parser.add_argument("--game", default="age_of_discovery")
    parser.add_argument("--profile", default=None, help="a folder: a py-spy round per variant")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(apart=False, client="lean")  # what run.caravel_round reads besides
    args = parser.parse_args()
    if args.role == "serve":
        serve(args.variant, args.parse, args.redis, args.port)
        return
    if args.role == "top":
        spy_top(args.profile, args.lines)
        return
    if args.role == "engine":
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(engine(args.redis, args.answer == "list"))
        return
    drive(args)


def drive(args: argparse.Namespace) -> None:
    import boardgameio
    import run

    variants = [v for v in args.variants.split(",") if v]
    peer = boardgameio.install() if args.bgio else None
    results: list[dict[str, Any]] = []

    def record(result: dict[str, Any]) -> None:
        result["load_average"] = load_average()
        results.append(result)
        print(json.dumps(result), flush=True)

    for _ in range(args.rounds):
        if peer is not None:
            record(boardgameio.run(peer, args.tables, args.seconds, args.warmup))
        for variant in variants:
            record(floor_round(variant, args))
        if args.caravel:
            record(run.caravel_round(TREE, args.caravel_mode, args, "caravel", args.processes))
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for variant in variants:
            out = os.path.join(args.profile, f"{variant}.txt")
            result = floor_round(variant, args, out)
            result["load_average"] = load_average()
            print(json.dumps(result), flush=True)
            print(f"py-spy raw profile of the floor lobby ({variant}): {out}", flush=True)
    summary = run.summary(results)
    print(json.dumps(summary) if args.json else summary)


if __name__ == "__main__":
    main()
