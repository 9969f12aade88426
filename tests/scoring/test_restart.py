"""Killing the scoring service mid-stream and starting it again changes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, select

from services.scoring.db import ScoredGame, table_of
from services.scoring.service import ScoringService
from shared.bus import Keys, connect

from ..backbone.helpers import running_engine
from ..cluster import OwnRedis
from .helpers import dump, game_ids, play_games

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


def environment(redis_url: str, keys: Keys, database_url: str, data: Path) -> dict[str, str]:
    """The settings of a `caravel` process working on this test's namespace and database,
    reading one entry per stream at a time."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")},
        "CARAVEL_REDIS_URL": redis_url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_DATABASE_URL": database_url,
        "CARAVEL_DATA_DIR": str(data),
        "CARAVEL_BATCH_SIZE": "1",
        "CARAVEL_METRICS_PORT": "0",
        "CARAVEL_LOG_LEVEL": "WARNING",
    }


def scoring_process(
    redis_url: str, keys: Keys, database_url: str, data: Path
) -> subprocess.Popen[bytes]:
    """`caravel scoring` in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", "scoring"],
        env=environment(redis_url, keys, database_url, data),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def versions(db: Engine) -> dict[str, int]:
    table = table_of(ScoredGame)
    with db.connect() as conn:
        return dict(conn.execute(select(table.c.game_id, table.c.version)).all())


async def wait_until(predicate: object, process: subprocess.Popen[bytes]) -> None:
    for _ in range(3000):
        if predicate():  # type: ignore[operator]
            return
        assert process.poll() is None, "caravel scoring exited"
        await asyncio.sleep(0.01)
    raise TimeoutError("the scoring service did not get there")


async def test_killed_mid_stream_and_restarted_equals_a_clean_rebuild(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, database: Engine, tmp_path: Path
) -> None:
    """SIGKILL while the service is part way through the streams, start it again: once it
    has caught up, every table is exactly what `caravel projections rebuild` writes."""
    ids = game_ids(keys, 3, "g-kill")
    played = await play_games(
        redis,
        keys,
        [(ids[0], 4, 21, None), (ids[1], 3, 22, None), (ids[2], 2, 23, None)],
        {ids[0]: {"0": "bot:random", "1": "human", "2": "bot:random", "3": "human"}},
    )
    final = {game_id: state.version for game_id, (_, state) in played.items()}

    process = scoring_process(redis_url, keys, database_url, tmp_path)
    try:
        await wait_until(lambda: sum(versions(database).values()) > 100, process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        process.kill()
    assert versions(database) != final, "killed too late: nothing was left to do"

    process = scoring_process(redis_url, keys, database_url, tmp_path)
    try:
        await wait_until(lambda: versions(database) == final, process)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    live = dump(database)

    rebuilt = subprocess.run(
        [sys.executable, "-m", "services.cli", "projections", "rebuild", "scoring", "--json"],
        env=environment(redis_url, keys, database_url, tmp_path),
        capture_output=True,
        check=True,
    )
    report = json.loads(rebuilt.stdout.splitlines()[-1])
    assert report["games"] == 3 and report["events"] == sum(final.values())
    assert dump(database) == live


async def test_scoring_and_an_engine_started_while_redis_is_away_serve_once_it_is_back(
    keys: Keys, database: Engine
) -> None:
    """Issue 25, the chaos run's "scoring differs" (CI, twice): a scoring process started
    again while Redis was killed failed in its start (the checkpoints marked in Redis), its
    task ended, and the process lived on scoring nothing; an engine's start did the same.
    Here both start against a port nothing answers on, then a Redis comes up there and a
    game is played: they waited for it, the engine accepts its commands and scoring scores
    it."""
    server = OwnRedis()
    redis = connect(server.url)
    scorer = ScoringService(redis, keys, database)
    stop = asyncio.Event()
    scoring = asyncio.create_task(scorer.run(stop))
    try:
        async with running_engine(redis, keys):
            await asyncio.sleep(1)  # a few failed starts
            assert not scoring.done(), "the scoring task ended while Redis was away"
            await server.start()
            (game,) = game_ids(keys, 1, "away")
            played = await play_games(redis, keys, [(game, 3, 4, 30)], engine=False)
        version = len(played[game][0])  # at least one event a command
        for _ in range(600):
            if versions(database).get(game, 0) >= version and await scorer.caught_up():
                break
            await asyncio.sleep(0.1)
        assert versions(database).get(game, 0) >= version
        assert await scorer.caught_up()
    finally:
        async with server:  # stopped last
            stop.set()
            await asyncio.wait_for(scoring, 30)
            await redis.aclose()
