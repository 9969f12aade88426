"""Benchmark: scoring's CPU per event when each commit touches many games a little.

    PYTHONPATH=TREE python benchmarks/scoring_cpu.py --games 60 --moves 400 --batch 3 \
        --rounds 2 [--redis-url URL]

Pre-fills the command streams as ``benchmarks.consumers`` does (``--games`` random games of
4 seats, up to ``--moves`` commands each: 400 plays them to their end), lets an engine
append their events, then runs the scoring service on a fresh SQLite file (WAL, as
``caravel up`` makes it) reading ``--batch`` entries a stream at a time, so that each commit
holds one or two events of each of many games, as under live play, rather than a backlog's
long runs of one game. Prints, per round, the process's CPU (all threads: the SQL thread
too) from the service's start until it has scored every stream, per 1,000 events. Its own
polling (every 0.1 s) is counted too. ``PYTHONPATH`` picks the tree measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from benchmarks.consumers import _games, _prefill
from services.engine import Engine
from services.lobby.db import make_engine
from services.runtime import POOL_WAIT_S
from services.scoring.db import create_tables
from services.scoring.service import ScoringService
from shared.bus import Keys, connect, delete_namespace
from shared.observability import configure_logging
from shared.settings import Settings


async def _engine_done(redis: Redis, streams: list[str]) -> bool:
    """Every command delivered to the engine and acknowledged (empty streams skipped)."""
    for stream in streams:
        newest: Any = await redis.xrevrange(stream, count=1)
        if not newest:
            continue
        groups: Any = await redis.xinfo_groups(stream)
        mine = [g for g in groups if g["name"] in ("engine", b"engine")]
        if not mine or mine[0]["pending"] or mine[0]["last-delivered-id"] != newest[0][0]:
            return False
    return True


async def measure(
    url: str, games: int, moves: int, batch: int, rounds: int
) -> list[dict[str, float]]:
    keys = Keys(prefix=f"cvscore-{uuid.uuid4().hex[:8]}", partitions=64)
    settings = Settings(key_prefix=keys.prefix, partitions=64, bot_think_ms=0)
    redis = connect(url, POOL_WAIT_S, max_connections=settings.redis_max_connections)
    commands = [keys.commands(p) for p in keys.all_partitions()]
    events = [keys.events(p) for p in keys.all_partitions()]
    out = []
    try:
        await _prefill(redis, keys, _games(games, moves, 4, 1))
        stop = asyncio.Event()
        engine = asyncio.create_task(Engine(redis, settings, keys).run(stop))
        while not await _engine_done(redis, commands):
            await asyncio.sleep(0.1)
        stop.set()
        await engine
        appended = sum([await redis.xlen(stream) for stream in events])
        for _ in range(rounds):
            folder = Path(tempfile.mkdtemp(prefix="caravel-scorecpu-"))
            db = make_engine(f"sqlite:///{folder / 'scoring.db'}")
            create_tables(db)  # migrated before the clock starts
            scorer = ScoringService(redis, keys, db, batch_size=batch, commit_interval_s=0)
            cpu, started, stop = time.process_time(), time.perf_counter(), asyncio.Event()
            task = asyncio.create_task(scorer.run(stop))
            while not await scorer.caught_up():
                await asyncio.sleep(0.1)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - started
            stop.set()
            await task
            db.dispose()
            for file in folder.iterdir():
                file.unlink()
            folder.rmdir()
            out.append(
                {
                    "events": appended,
                    "cpu_s": round(cpu, 3),
                    "wall_s": round(wall, 3),
                    "cpu_ms_per_1000_events": round(1e6 * cpu / appended, 1),
                }
            )
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=60)
    parser.add_argument("--moves", type=int, default=400)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    options = parser.parse_args()
    configure_logging("WARNING")
    figures = asyncio.run(
        measure(options.redis_url, options.games, options.moves, options.batch, options.rounds)
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
