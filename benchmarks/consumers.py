"""Benchmark: how many stream entries each service's consumer drains per second.

    python -m benchmarks.consumers --games 200 --moves 40 [--partitions 8] [--redis-url URL]

In a Redis key namespace of its own, it pre-fills the partition command streams with
``--games`` games of the default game (a ``create_game`` and up to ``--moves`` random legal
commands each, played with the rules core, sent through ``CommandSender``; every seat a
``random`` bot in the seats hash, as the lobby writes it), then runs each service's consumer
alone, in process, on what the previous one left, and times it from its start until its
streams are drained:

- ``engine``: the command streams (group ``engine``), which fill the event and decision
  streams;
- ``views``: the views projector on the event streams (group ``views``);
- ``scoring``: the scoring projection on the event streams (XREAD, SQL checkpoints; a fresh
  SQLite file);
- ``fanout``: the lobby's fan-out on the event and decision streams, every game followed
  by one listener (its subscribers read from the streams' start instead of their tail);
- ``bots``: the bot player on the decision streams (group ``ai``), answering the newest
  request of each seat with the ``random`` bot (its answers go to the command streams).

Prints one JSON object: entries, seconds and entries per second of each. The figures
include each service's start (subscribing to its streams). A benchmark, not a test; the
namespace and the SQLite file are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from services.ai.service import BotPlayer
from services.engine import Engine
from services.lobby.db import make_engine
from services.lobby.fanout import BATCH, EventFanout
from services.lobby.views import ViewProjector
from services.runtime import POOL_WAIT_S
from services.scoring.service import ScoringService
from shared.bus import CommandSender, Follower, Keys, connect, delete_namespace
from shared.contracts import CommandEnvelope, Seats
from shared.games import api
from shared.observability import configure_logging
from shared.settings import Settings

Done = Callable[[], Awaitable[bool]]


def _games(count: int, moves: int, players: int, seed: int) -> list[list[CommandEnvelope]]:
    """Each game's commands: its creation, then up to ``moves`` random legal commands."""
    game = api.get()
    rules = game.rules(game.default_ruleset)
    out = []
    for i in range(count):
        game_id = f"bench-{i}"
        chooser = random.Random(seed + i)
        state, _ = game.new_game(rules, players, seed + i)
        payload = {"game": game.name, "players": players, "seed": seed + i}
        commands = [CommandEnvelope(game_id=game_id, type="create_game", payload=payload)]
        while len(commands) <= moves and (decisions := game.pending(state)):
            chosen = chooser.choice(game.legal_commands(state, chooser.choice(decisions).seat))
            game.decide_into(state, chosen)
            data = chosen.to_dict()
            kind, seat = data.pop("type"), data.pop("seat")
            commands.append(CommandEnvelope(game_id=game_id, seat=seat, type=kind, payload=data))
        out.append(commands)
    return out


async def _prefill(redis: Redis, keys: Keys, games: list[list[CommandEnvelope]]) -> int:
    """Seat bots (as the lobby would) and send every command; returns how many."""
    players = len({c.seat for commands in games for c in commands if c.seat is not None})
    seats = Seats(players={seat: "bot:random" for seat in range(players)})
    for commands in games:
        await redis.hset(keys.seats(commands[0].game_id), mapping=seats.to_mapping())
    sender = CommandSender(redis, keys)
    # Game by game in turn, as players interleave: a batch touches many games.
    for step in range(max(len(c) for c in games)):
        for commands in games:
            if step < len(commands):
                await sender.send(commands[step])
    return sum(len(c) for c in games)


async def _entries(redis: Redis, streams: list[str]) -> int:
    return sum([await redis.xlen(stream) for stream in streams])


async def _group_drained(redis: Redis, streams: list[str], group: str) -> bool:
    """Every entry of ``streams`` delivered to ``group`` and acknowledged."""
    for stream in streams:
        if not await redis.exists(stream):
            continue
        groups: Any = await redis.xinfo_groups(stream)
        mine = [g for g in groups if g["name"] in (group, group.encode())]
        newest: Any = await redis.xrevrange(stream, count=1)
        if not mine or mine[0]["pending"] or mine[0]["last-delivered-id"] != newest[0][0]:
            return False
    return True


async def _timed(run: Callable[[asyncio.Event], Awaitable[Any]], done: Done) -> float:
    """Seconds from starting ``run`` until ``done()`` holds (polled every 5 ms)."""
    stop = asyncio.Event()
    started = time.perf_counter()
    task = asyncio.create_task(run(stop))
    try:
        while not await done():
            if task.done():
                task.result()  # it failed: say how
                raise RuntimeError("the consumer stopped before draining its streams")
            await asyncio.sleep(0.005)
        return time.perf_counter() - started
    finally:
        stop.set()
        await task


async def _fanout(redis: Redis, keys: Keys, game_ids: list[str], streams: list[str]) -> float:
    """The lobby's fan-out delivering every entry of ``streams`` to one listener per game:
    its own handler and broker, its subscribers started at the streams' start."""
    fanout = EventFanout(redis, keys)
    queues: list[asyncio.Queue[Any]] = []
    for game_id in game_ids:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        fanout._listeners[game_id] = {queue}
        queues.append(queue)
    total = await _entries(redis, streams)

    async def run(stop: asyncio.Event) -> None:
        await fanout.broker.connect()
        follower = Follower(fanout.broker, fanout._deliver, batch=BATCH)
        for stream in streams:
            await follower.add(stream, "0-0")
        await stop.wait()
        await follower.close()
        await fanout.close()

    async def delivered() -> bool:
        return sum(q.qsize() for q in queues) >= total

    return await _timed(run, delivered)


def _figure(entries: int, seconds: float) -> dict[str, float]:
    return {
        "entries": entries,
        "seconds": round(seconds, 3),
        "entries_per_second": round(entries / seconds, 1),
    }


async def measure(
    url: str, games: int, moves: int, players: int, partitions: int, seed: int
) -> dict[str, Any]:
    keys = Keys(prefix=f"cvbench-{uuid.uuid4().hex[:8]}", partitions=partitions)
    settings = Settings(key_prefix=keys.prefix, partitions=partitions, bot_think_ms=0)
    # As a service's pool: a burst of bot decisions queues for a connection, not fails.
    redis = connect(url, POOL_WAIT_S, max_connections=settings.redis_max_connections)
    commands = [keys.commands(p) for p in keys.all_partitions()]
    events = [keys.events(p) for p in keys.all_partitions()]
    decisions = [keys.decisions(p) for p in keys.all_partitions()]
    bot_decisions = [keys.bot_decisions(p) for p in keys.all_partitions()]  # all bots here
    played = _games(games, moves, players, seed)
    figures: dict[str, Any] = {}
    folder = tempfile.mkdtemp(prefix="caravel-consumers-")
    try:
        sent = await _prefill(redis, keys, played)
        engine = Engine(redis, settings, keys)
        seconds = await _timed(engine.run, lambda: _group_drained(redis, commands, "engine"))
        figures["engine"] = _figure(sent, seconds)
        appended, requested = await _entries(redis, events), await _entries(redis, decisions)

        projector = ViewProjector(redis, keys)  # every game read by someone: each event projected
        projector.wanted.update(dict.fromkeys((c[0].game_id for c in played), math.inf))
        seconds = await _timed(projector.run, lambda: _group_drained(redis, events, "views"))
        figures["views"] = _figure(appended, seconds)

        db = make_engine(f"sqlite:///{Path(folder) / 'scoring.db'}")
        scorer = ScoringService(redis, keys, db)
        figures["scoring"] = _figure(appended, await _timed(scorer.run, scorer.caught_up))
        db.dispose()

        game_ids = [c[0].game_id for c in played]
        seconds = await _fanout(redis, keys, game_ids, events + decisions)
        figures["fanout"] = _figure(appended + requested, seconds)

        bots = BotPlayer(redis, keys, settings)
        seconds = await _timed(bots.run, lambda: _group_drained(redis, bot_decisions, "ai"))
        figures["bots"] = _figure(await _entries(redis, bot_decisions), seconds)
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
        for file in Path(folder).iterdir():
            file.unlink()
        Path(folder).rmdir()
    return {
        "games": games,
        "moves": moves,
        "players": players,
        "partitions": partitions,
        **figures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    options = parser.parse_args()
    configure_logging("WARNING")
    figures = asyncio.run(
        measure(
            options.redis_url,
            options.games,
            options.moves,
            options.players,
            options.partitions,
            options.seed,
        )
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
