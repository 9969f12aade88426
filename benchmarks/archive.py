"""Benchmark: archiving finished games to SQL, and the Redis memory it frees.

    python benchmarks/archive.py --games 200 [--redis-url URL] [--postgres-url URL]

Plays ``--games`` random 4-player games with the rules core in process and writes each as
the services would: one append per command through the event store (log, seen command ids,
partition notifications), the final snapshot, the lobby's seats, the views (the real views
projection) and the final hash. Then it measures, in a Redis key namespace of its own:

- the memory of the games' keys (``MEMORY USAGE ... SAMPLES 0``) and Redis's
  ``used_memory`` before and after;
- the time the janitor takes to archive them all (written, read back, verified by replay,
  deleted), with a retention long enough that it trims nothing meanwhile;
- then what trimming the partition streams behind their groups frees.

The archive goes to a SQLite file, or with ``--postgres-url`` to a PostgreSQL schema of its
own. Prints one JSON object; deletes the namespace, the file and the schema. ``used_memory`` is the
whole server's: on a Redis that others use at the same time, read the per-key figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import tempfile
import time
import uuid
from typing import Any

# benchmarks/ is on the path when this file runs: the same random games as the rebuild's.
from projections import play
from redis.asyncio import Redis
from scratch import postgres_schema  # beside this script
from sqlalchemy import func, select

from services.engine.janitor import Janitor
from services.lobby.db import make_engine
from services.lobby.views import ViewProjector
from shared.bus import Keys, connect, delete_namespace
from shared.eventstore import Archive, EventStore, GameCodec
from shared.eventstore.archive import TABLE
from shared.eventstore.logfile import dump_lines
from shared.games import api
from shared.observability import configure_logging
from shared.settings import Settings


async def fill(redis: Redis, keys: Keys, games: int, seed: int) -> list[str]:
    """``games`` finished games as the services leave them; returns their ids."""
    store, codec, game = EventStore(redis, keys), GameCodec(), api.get()
    ids = []
    for i in range(games):
        game_id = f"arch-{i}"
        appends = play(game, game_id, seed + i)
        results = await store.append_many(appends)
        assert all(r.status == "ok" for r in results), results
        events = await store.read(game_id)
        state = codec.replay(events)
        await store.save_snapshots([(game_id, len(events), codec.snapshot(state))])
        seats = {str(s): "bot:greedy" if s else "human" for s in range(4)}
        await redis.hset(keys.seats(game_id), mapping=seats)  # type: ignore[arg-type]
        await store.record_final_hash(game_id, codec.state_hash(state), len(events))
        ids.append(game_id)
    projector = ViewProjector(redis, keys)  # the games read by someone: their views are kept
    projector.wanted.update(dict.fromkeys(ids, math.inf))
    stop = asyncio.Event()
    projecting = asyncio.create_task(projector.run(stop))
    while not projector.consumer.streams or not await projector.consumer.caught_up():
        await asyncio.sleep(0.05)
    stop.set()
    await projecting
    return ids


async def key_memory(redis: Redis, names: list[str]) -> int:
    """Bytes Redis uses for these keys (0 for a missing one), counted exactly."""
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.execute_command("MEMORY USAGE", name, "SAMPLES", "0")
        sizes: list[Any] = await pipe.execute()
    return sum(size or 0 for size in sizes)


def game_keys(keys: Keys, game_ids: list[str]) -> list[str]:
    k = keys
    per_game = (k.log, k.meta, k.seen, k.snapshot, k.seats, k.view)
    return [key(g) for g in game_ids for key in per_game]


def partition_keys(keys: Keys, *kinds: str) -> list[str]:
    return [getattr(keys, kind)(p) for p in keys.all_partitions() for kind in kinds]


async def used_memory(redis: Redis) -> int:
    info: Any = await redis.info("memory")
    return int(info["used_memory"])


async def run(args: argparse.Namespace, database_url: str) -> dict[str, Any]:
    keys = Keys(prefix=f"cvbench-{uuid.uuid4().hex[:8]}", partitions=64)
    redis = connect(args.redis_url)
    db = make_engine(database_url)
    sets = partition_keys(keys, "games", "finished", "archived")
    streams = partition_keys(keys, "commands", "events", "decisions", "rejections")
    try:
        ids = await fill(redis, keys, args.games, args.seed)
        events = sum([await redis.xlen(keys.log(g)) for g in ids])
        before = {
            "used_memory": await used_memory(redis),
            "game_keys": await key_memory(redis, game_keys(keys, ids)),
            "registry_sets": await key_memory(redis, sets),
            "streams": await key_memory(redis, streams),
        }
        raw_log_bytes = 0
        store = EventStore(redis, keys)
        for g in ids:
            raw_log_bytes += len(dump_lines(await store.read(g)))

        archive = Archive(db)
        settings = Settings(archive_after_s=0, stream_retention_s=3600)
        janitor = Janitor(redis, keys, settings, archive, keys.all_partitions)
        started = time.perf_counter()
        for _ in range(10):  # one round archives up to 100 games a partition
            await janitor.round()
            if not await redis.exists(*[keys.log(g) for g in ids]):
                break
        seconds = time.perf_counter() - started
        after = {
            "used_memory": await used_memory(redis),
            "game_keys": await key_memory(redis, game_keys(keys, ids)),
            "registry_sets": await key_memory(redis, sets),
            "streams": await key_memory(redis, streams),
        }
        trimmer = Janitor(redis, keys, Settings(stream_retention_s=0), None, keys.all_partitions)
        await trimmer.round()
        trimmed = {
            "used_memory": await used_memory(redis),
            "streams": await key_memory(redis, streams),
        }
        with db.connect() as conn:
            stored = conn.execute(select(func.sum(func.length(TABLE.c.log)))).scalar_one()
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
        db.dispose()
    return {
        "games": args.games,
        "events": events,
        "archive_seconds": round(seconds, 2),
        "games_per_second": round(args.games / seconds, 1),
        "archived": janitor.stats["archived"],
        "bytes_per_game_in_redis": before["game_keys"] // args.games,
        "log_json_bytes": raw_log_bytes,
        "archived_log_bytes": stored,
        "compression_ratio": round(raw_log_bytes / stored, 1),
        "before": before,
        "after_archiving": after,
        "after_trimming": trimmed,
        "freed_by_archiving": {k: before[k] - after[k] for k in before},
        "freed_by_trimming": {k: after[k] - trimmed[k] for k in trimmed},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--redis-url", default=os.environ.get("CARAVEL_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--postgres-url", default="", help="archive in a schema of its own there (default: SQLite)"
    )
    args = parser.parse_args()
    configure_logging("WARNING")  # stdout is for the figures
    if not args.postgres_url:
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{os.path.join(folder, 'archive.db')}"
            print(json.dumps(asyncio.run(run(args, url))))
        return
    with postgres_schema(args.postgres_url) as url:
        print(json.dumps({"database": "postgresql", **asyncio.run(run(args, url))}))


if __name__ == "__main__":
    main()
