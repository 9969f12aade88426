"""The scoring projection on a real Redis and real SQL (SQLite, and PostgreSQL when set)."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import Engine, select
from sqlmodel import SQLModel

from services.scoring.db import (
    Decision,
    Rating,
    RatingChange,
    Result,
    ScoredGame,
    Standing,
    table_of,
)
from services.scoring.service import ScoringService
from shared.bus import Keys
from shared.games import age_of_discovery as aod

from .helpers import dump, game_ids, play_games

PARTS = ("colonies", "discoveries", "buildings", "economy", "total", "place")


async def drain(service: ScoringService) -> None:
    await service.start()
    while await service.step(block_ms=None):
        pass


def rows(db: Engine, model: type[SQLModel]) -> list[dict[str, Any]]:
    table = table_of(model)
    with db.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]


async def test_standings_equal_the_rules_score_and_ratings_follow_places(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """After a finished game the standings and results are ``score()`` of the rules core,
    winners' ratings rise and the last place's falls; decisions carry the seat's kind."""
    (game,) = game_ids(keys, 1, "g-score")
    seats = {game: {"0": "human", "1": "bot:greedy", "2": "bot:random"}}
    played = await play_games(redis, keys, [(game, 3, 5, None)], seats)
    commands, final = played[game]
    await drain(ScoringService(redis, keys, database, batch_size=50))

    expected = {row["seat"]: row for row in aod.score(final)}
    standings = {r["seat"]: r for r in rows(database, Standing)}
    assert {s: {k: r[k] for k in PARTS} for s, r in standings.items()} == {
        s: {k: r[k] for k in PARTS} for s, r in expected.items()
    }
    results = {r["seat"]: r for r in rows(database, Result)}
    assert {s: r["place"] for s, r in results.items()} == {
        s: r["place"] for s, r in expected.items()
    }
    assert [json.loads(results[s]["tiebreak"]) for s in range(3)] == [
        expected[s]["tiebreak"] for s in range(3)
    ]
    assert [results[s]["seat_kind"] for s in range(3)] == ["human", "bot:greedy", "bot:random"]
    assert [results[s]["nation"] for s in range(3)] == ["England", "France", "Spain"]
    (scored,) = rows(database, ScoredGame)
    assert scored["status"] == "finished" and scored["version"] == final.version
    assert scored["decisions"] == len(commands) - 1

    ratings = {r["player"]: r for r in rows(database, Rating)}
    players = {0: "player:seat 0", 1: "bot:greedy", 2: "bot:random"}
    for seat, row in expected.items():
        rating = ratings[players[seat]]
        assert rating["games"] == 1 and rating["wins"] == int(row["place"] == 1)
        if row["place"] == 1:
            assert rating["mu"] > 25.0
        if row["place"] == max(r["place"] for r in expected.values()):
            assert rating["mu"] < 25.0

    decisions = rows(database, Decision)
    assert len(decisions) == len(commands) - 1
    kinds = {(d["seat"], d["seat_kind"]) for d in decisions}
    assert kinds == {(0, "human"), (1, "bot:greedy"), (2, "bot:random")}
    assert all(d["latency_ms"] >= 0 for d in decisions)


async def test_live_projection_equals_a_rebuild_row_for_row(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Read one entry per stream at a time, a short game that finished last is rated before
    a long one that finished first; ratings still follow the finish order, and a rebuild
    from the logs writes exactly the same rows (running games included)."""
    long_game, short_game, running = game_ids(keys, 3, "g-order")
    await play_games(
        redis,
        keys,
        [(long_game, 4, 3, None), (short_game, 2, 4, None), (running, 3, 9, 60)],
        {  # two players in both games: the order of rating matters to them
            long_game: {"0": "bot:greedy", "1": "human", "2": "bot:greedy", "3": "human"},
            short_game: {"0": "bot:greedy", "1": "human"},
        },
    )
    await drain(ScoringService(redis, keys, database, batch_size=1))
    live = dump(database)
    statuses = {r["game_id"]: r["status"] for r in rows(database, ScoredGame)}
    assert statuses == {long_game: "finished", short_game: "finished", running: "running"}
    history = sorted(rows(database, RatingChange), key=lambda r: r["finish_key"])
    last: dict[str, float] = {}
    for change in history:  # each player's chain of ratings is unbroken, in finish order
        assert change["mu_before"] == last.get(change["player"], 25.0)
        last[change["player"]] = change["mu_after"]

    report = await ScoringService(redis, keys, database).rebuild()
    assert report.games == 3 and report.events == sum(
        r["version"] for r in rows(database, ScoredGame)
    )
    assert dump(database) == live


async def test_two_scoring_services_on_one_database_count_nothing_twice(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Two services read the same streams in turns: the one behind finds its checkpoints
    moved, rolls back and reads on from the other's; the tables equal a rebuild."""
    first, second = game_ids(keys, 2, "g-two")
    await play_games(redis, keys, [(first, 2, 31, None), (second, 3, 32, None)])
    a = ScoringService(redis, keys, database, batch_size=3)
    b = ScoringService(redis, keys, database, batch_size=11)
    await a.start()
    await b.start()
    while (await a.step(block_ms=None)) + (await b.step(block_ms=None)):
        pass
    live = dump(database)
    assert {r["status"] for r in rows(database, ScoredGame)} == {"finished"}
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == live
