"""``caravel bench pipeline``: many concurrent games through the real bus and engine.

Each game is a task that keeps its own copy of the game (the rules are deterministic, so
the copy follows the engine's log exactly), sends a random legal command onto the game's
partition command stream and waits until the engine has appended its events, seen on the
partition event streams. The figure is commands per second, and the latency from command
sent to events appended. Several games make a mixed load: game task ``i`` plays the
``i``-th of them in turn (half and half for two).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from services.runtime import tune_collector
from services.usage import percentile
from shared.bus import Broker, Delivery, Follower, Keys, delete_namespace
from shared.contracts import SCHEMA_VERSION, CommandEnvelope, Notification
from shared.games import api
from shared.settings import Settings

WATCH_BATCH = 1000  # event entries a watcher's read takes at most
WATCH_BLOCK_MS = 100


@dataclass
class Waiters:
    """Futures keyed by (game, version), resolved when that version reaches the stream."""

    futures: dict[tuple[str, int], asyncio.Future[float]] = field(default_factory=dict)

    def expect(self, game_id: str, version: int) -> asyncio.Future[float]:
        future = asyncio.get_running_loop().create_future()
        self.futures[(game_id, version)] = future
        return future

    def seen(self, game_id: str, version: int, at: float) -> None:
        future = self.futures.pop((game_id, version), None)
        if future is not None and not future.done():
            future.set_result(at)


class Outbox:
    """Commands from every game task, sent in pipelined batches: one round trip carries
    whatever the tasks queued since the last one (the driver must not be the bottleneck)."""

    def __init__(self, redis: Redis, keys: Keys, broker: Broker) -> None:
        self.redis = redis
        self.keys = keys
        self.broker = broker
        self.queue: list[tuple[str, bytes, str]] = []
        self.ready = asyncio.Event()

    def send(self, command: CommandEnvelope) -> None:
        stream = self.keys.commands(self.keys.partition(command.game_id))
        self.queue.append((stream, command.model_dump_json().encode(), command.command_id))
        self.ready.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.ready.wait()
            self.ready.clear()
            batch, self.queue = self.queue, []
            async with self.redis.pipeline(transaction=False) as pipe:
                for stream, payload, command_id in batch:
                    await self.broker.publish_in(pipe, payload, stream, command_id)
                await pipe.execute()


def _broker(redis: Redis, keys: Keys) -> Broker:
    """The driver's broker, with no metrics middleware: it is a measuring tool, and the
    middleware's cost per batch is CPU taken from the engine it measures."""
    return Broker(redis, readers=keys.partitions, service="bench", middlewares=())


async def _watch(broker: Broker, keys: Keys, waiters: Waiters, stop: asyncio.Event) -> None:
    """Follow every partition event stream through FastStream until ``stop``, from the start
    (the namespace is new: nothing is missed), resolving the waiters of the versions seen."""

    async def seen(deliveries: list[Delivery]) -> None:
        now = time.perf_counter()
        for d in deliveries:
            notification = Notification.from_fields(d.fields)
            waiters.seen(notification.game_id, notification.version, now)

    await broker.start()
    follower = Follower(broker, seen, batch=WATCH_BATCH, block_ms=WATCH_BLOCK_MS)
    try:
        for p in keys.all_partitions():
            await follower.add(keys.events(p), "0-0")
        await stop.wait()
    finally:
        await follower.close()
        await broker.stop()


async def _play(game_id: str, seed: int, players: int, run: Run, which: int) -> None:
    """One game, the ``which``-th of the run's: create it, then send random legal commands
    until it ends or time is up."""
    game, rules = run.games[which % len(run.games)]
    state, events = game.new_game(rules, players, seed)
    version = len(events)  # the copy's version: the engine's log follows it exactly
    chooser = random.Random(seed)
    command = CommandEnvelope(
        game_id=game_id,
        type="create_game",
        actor="system",
        payload={"game": game.name, "players": players, "seed": seed},
    )
    # Games start at random moments of the warm-up, so their turns do not run in lockstep;
    # with a target rate, each then sends one command per interval (open loop).
    next_send = run.started + chooser.random() * run.warmup
    while True:
        await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
        next_send = max(next_send + run.interval, time.perf_counter())
        future = run.waiters.expect(game_id, version)
        sent_at = time.perf_counter()
        run.outbox.send(command)
        run.record(sent_at, await asyncio.wait_for(future, 60) - sent_at, game.name)
        decisions = game.pending(state)
        if not decisions or time.perf_counter() > run.deadline:
            return
        seat = chooser.choice(decisions).seat
        chosen = chooser.choice(game.legal_commands(state, seat))
        version += len(game.decide_into(state, chosen))
        data = chosen.to_dict()
        kind = data.pop("type")
        data.pop("seat")
        command = CommandEnvelope.model_construct(
            command_id=uuid.uuid4().hex,
            game_id=game_id,
            seat=seat,
            type=kind,
            payload=data,
            actor="bot",
            causation_id=None,
            correlation_id=None,
            issued_at=datetime.now(UTC),
            schema_version=SCHEMA_VERSION,
        )


@dataclass
class Run:
    """What the game tasks share: the games and their rules, the outbox, the waiters, the
    clock and the figures."""

    games: list[tuple[api.AnyGame, Any]]
    outbox: Outbox
    waiters: Waiters
    started: float
    warmup: float
    deadline: float
    interval: float
    samples: list[tuple[float, float, str]] = field(default_factory=list)

    def record(self, sent_at: float, latency: float, game: str) -> None:
        self.samples.append((sent_at, latency, game))

    def figures(self, ended: float) -> dict[str, Any]:
        """Throughput and latency of the commands sent after the warm-up."""
        measured_from = self.started + self.warmup
        measured = [(lat, game) for sent, lat, game in self.samples if sent >= measured_from]
        window = sorted(lat for lat, _ in measured)
        seconds = max(ended - measured_from, 1e-9)
        return {
            "commands": len(self.samples),
            "commands_by_game": dict(sorted(Counter(game for *_, game in self.samples).items())),
            "measured_by_game": dict(sorted(Counter(game for _, game in measured).items())),
            "measured_commands": len(window),
            "measured_seconds": round(seconds, 2),
            "commands_per_second": round(len(window) / seconds, 1),
            "latency_ms": {
                name: round(1000 * percentile(window, q), 2)
                for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
            },
        }


def _spawn_engines(count: int, redis_url: str, keys: Keys) -> list[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_LOG_LEVEL": "WARNING",
    }
    return [
        subprocess.Popen(
            [sys.executable, "-m", "services.cli", "engine"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


async def pipeline(
    redis: Redis,
    redis_url: str,
    games: int,
    players: int,
    seconds: float,
    engines: int,
    partitions: int,
    seed: int,
    rate: float = 0,
    warmup: float = 3.0,
    kinds: Sequence[api.AnyGame] = (),
) -> dict[str, Any]:
    """Run the benchmark (games of ``kinds`` in turn, the default game if none, each with
    its default ruleset) in its own key namespace and return its figures."""
    keys = Keys(prefix=f"cvbench-{uuid.uuid4().hex[:8]}", partitions=partitions)
    kinds = list(kinds) or [api.get()]
    waiters = Waiters()
    stop = asyncio.Event()
    broker = _broker(redis, keys)
    watcher = asyncio.create_task(_watch(broker, keys, waiters, stop))
    workers: list[subprocess.Popen[bytes]] = []
    in_process: list[asyncio.Task[None]] = []
    if engines > 0:
        workers = _spawn_engines(engines, redis_url, keys)
    else:
        from services.engine import Engine

        settings = Settings(key_prefix=keys.prefix, partitions=partitions)
        in_process.append(asyncio.create_task(Engine(redis, settings, keys).run(stop)))
    outbox = Outbox(redis, keys, broker)
    flusher = asyncio.create_task(outbox.run(stop))
    try:
        await _engines_ready(redis, keys, max(engines, 1))
        tune_collector()  # the driver as the services run, so that it takes less of the CPU
        started = time.perf_counter()
        run = Run(
            games=[(game, game.rules(game.default_ruleset)) for game in kinds],
            outbox=outbox,
            waiters=waiters,
            started=started,
            warmup=warmup,
            deadline=started + warmup + seconds,
            interval=games / rate if rate > 0 else 0.0,
        )
        await asyncio.gather(
            *(_play(f"bench-{i}", seed + i, players, run, i) for i in range(games))
        )
        figures = run.figures(time.perf_counter())
    finally:
        stop.set()
        outbox.ready.set()
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
        await asyncio.gather(watcher, flusher, *in_process, return_exceptions=True)
        await delete_namespace(redis, keys.prefix)
    return {
        "game": "+".join(game.name for game in kinds),
        "games": games,
        "target_rate": rate or None,
        "players": players,
        "engines": engines,
        "partitions": partitions,
        "warmup_seconds": warmup,
        **figures,
    }


async def _engines_ready(redis: Redis, keys: Keys, count: int) -> None:
    """Wait until every partition is leased, so the clock starts on a working pipeline."""
    for _ in range(600):
        # One GET per lease (each in its partition's slot: a cluster refuses one MGET of them).
        async with redis.pipeline(transaction=False) as pipe:
            for p in keys.all_partitions():
                pipe.get(keys.lease(p))
            owners = await pipe.execute()
        if all(owners) and len(set(owners)) >= min(count, keys.partitions):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("engines did not take the partitions")
