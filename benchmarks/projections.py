"""Benchmark: rebuilding the scoring projection from the logs of finished games.

    python benchmarks/projections.py --games 1000 [--redis-url URL] [--postgres-url URL]

Plays ``--games`` random 4-player games of ``--game`` (the default game unless named) with
its rules core in process and appends each
command's events through the event store (the engine's atomic script: logs, partition
streams, the games registry), in a Redis key namespace of its own. Then it times
``rebuild`` of the scoring projection on a fresh SQLite file and, unless ``--postgres-url``
is empty, in a PostgreSQL schema of its own; it prints events/s for each as JSON, and
deletes the namespace and the schema. A benchmark, not a test: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from scratch import postgres_schema  # beside this script

from services.lobby.db import make_engine
from services.scoring.service import ScoringService
from shared.bus import Keys, connect, delete_namespace
from shared.contracts import EncodedEvent, encode_event, new_id
from shared.eventstore import Append, EventStore
from shared.games import api


def _encode(
    game_id: str, version: int, events: list[api.Event], command_id: str, actor: str
) -> list[EncodedEvent]:
    at = datetime.now(UTC).isoformat()
    return [
        encode_event(
            event_id=new_id(),
            game_id=game_id,
            version=version + i,
            type=e.type,
            data=e.data,
            secret=e.secret,
            visibility=e.visibility,
            causation_id=command_id,
            correlation_id=command_id,
            actor=actor,
            recorded_at=at,
        )
        for i, e in enumerate(events, 1)
    ]


def play(game: api.AnyGame, game_id: str, seed: int) -> list[Append]:
    """One random game as the engine would append it: one append per command."""
    chooser = random.Random(seed)
    state, events = game.new_game(game.rules(game.default_ruleset), 4, seed)
    appends = [Append(game_id, 0, _encode(game_id, 0, events, f"{game_id}:c0", "system"), "")]
    version = len(events)
    while decisions := game.pending(state):
        seat = chooser.choice(decisions).seat
        events = game.decide_into(state, chooser.choice(game.legal_commands(state, seat)))
        command_id = f"{game_id}:c{len(appends)}"
        appends.append(
            Append(game_id, version, _encode(game_id, version, events, command_id, "bot"))
        )
        version += len(events)
    return appends


async def fill(store: EventStore, game: api.AnyGame, games: int, seed: int) -> int:
    """Append ``games`` finished games; returns how many events were written."""
    events = 0
    for i in range(games):
        appends = play(game, f"bench-{i}", seed + i)
        for start in range(0, len(appends), 500):
            results = await store.append_many(appends[start : start + 500])
            assert all(r.status == "ok" for r in results), results
        events += sum(len(a.events) for a in appends)
    return events


async def rebuild(redis_url: str, keys: Keys, database_url: str) -> dict[str, Any]:
    redis = connect(redis_url)
    db = make_engine(database_url)
    try:
        report = await ScoringService(redis, keys, db).rebuild()
    finally:
        db.dispose()
        await redis.aclose()
    return {
        "games": report.games,
        "events": report.events,
        "seconds": round(report.seconds, 2),
        "events_per_second": round(report.events_per_second),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    keys = Keys(prefix=f"cvbench-{uuid.uuid4().hex[:8]}", partitions=64)
    redis = connect(args.redis_url)
    game = api.get(args.game)
    out: dict[str, Any] = {"game": game.name, "games": args.games}
    try:
        started = time.perf_counter()
        out["events"] = await fill(EventStore(redis, keys), game, args.games, args.seed)
        out["fill_seconds"] = round(time.perf_counter() - started, 1)
        with tempfile.TemporaryDirectory() as folder:
            sqlite_url = f"sqlite:///{os.path.join(folder, 'bench.db')}"
            out["sqlite"] = await rebuild(args.redis_url, keys, sqlite_url)
        if args.postgres_url:
            with postgres_schema(args.postgres_url) as url:
                out["postgresql"] = await rebuild(args.redis_url, keys, url)
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default=api.DEFAULT_GAME, choices=api.names())
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--redis-url", default=os.environ.get("CARAVEL_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--postgres-url",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="'' to skip PostgreSQL",
    )
    print(json.dumps(asyncio.run(main_async(parser.parse_args()))))


if __name__ == "__main__":
    main()
