"""The scoring projection on a real Redis and real SQL (SQLite, and PostgreSQL when set)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import Connection, Engine, event, select
from sqlmodel import SQLModel

from services.scoring import flat
from services.scoring.db import (
    Decision,
    FactRow,
    Rating,
    RatingChange,
    Result,
    ScoredGame,
    Standing,
    _driver_upsert,
    _upsert_statement,
    create_tables,
    table_of,
    upsert,
)
from services.scoring.projection import FinishedGame, Rows, finish_key, rate
from services.scoring.service import ScoringService
from shared.bus import CommandSender, Keys
from shared.eventstore import EventStore
from shared.games import age_of_discovery as aod

from ..backbone.helpers import play_locally, running_engine, wait_for
from .helpers import dump, game_ids, play_games

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

GAME = "age_of_discovery"
PARTS = ("colonies", "discoveries", "buildings", "economy")


async def drain(*services: ScoringService) -> None:
    """Run the services (their subscribers score as entries come) until each has scored
    every stream to its end."""
    for service in services:
        await service.start()
    try:
        for service in services:
            await wait_for(service.caught_up, timeout_s=60)
    finally:
        for service in services:
            await service.close()


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
    scored_seats = {s: (r["breakdown"], r["total"], r["place"]) for s, r in standings.items()}
    assert scored_seats == {
        s: ({k: r[k] for k in PARTS}, r["total"], r["place"]) for s, r in expected.items()
    }
    assert {r["game"] for r in standings.values()} == {GAME}
    results = {r["seat"]: r for r in rows(database, Result)}
    assert {s: (r["place"], r["total"]) for s, r in results.items()} == {
        s: (r["place"], r["total"]) for s, r in expected.items()
    }
    assert all(list(r["breakdown"]) == list(PARTS) for r in results.values())  # the game's order
    assert [results[s]["breakdown"] for s in range(3)] == [
        {k: expected[s][k] for k in PARTS} for s in range(3)
    ]
    assert [results[s]["tiebreak"] for s in range(3)] == [expected[s]["tiebreak"] for s in range(3)]
    assert [results[s]["seat_kind"] for s in range(3)] == ["human", "bot:greedy", "bot:random"]
    assert [results[s]["side"] for s in range(3)] == ["England", "France", "Spain"]
    (scored,) = rows(database, ScoredGame)
    assert scored["status"] == "finished" and scored["version"] == final.version
    assert scored["game"] == GAME and scored["ruleset"] == "standard"
    assert scored["decisions"] == len(commands) - 1

    ratings = {r["player"]: r for r in rows(database, Rating)}
    players = {0: "player:seat 0", 1: "bot:greedy", 2: "bot:random"}
    for seat, row in expected.items():
        rating = ratings[players[seat]]
        assert rating["game"] == GAME
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
    """Two services read the same streams at once: the one behind finds a checkpoint
    moved, rolls back and reads on from the other's; the tables equal a rebuild."""
    first, second = game_ids(keys, 2, "g-two")
    await play_games(redis, keys, [(first, 2, 31, None), (second, 3, 32, None)])
    a = ScoringService(redis, keys, database, batch_size=3)
    b = ScoringService(redis, keys, database, batch_size=11)
    await drain(a, b)
    live = dump(database)
    assert {r["status"] for r in rows(database, ScoredGame)} == {"finished"}
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == live


async def test_moves_made_while_scoring_waits_are_committed_together(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Commands applied one at a time, each its own entry on the event stream, while the
    service waits between commits: their events are scored in one transaction (a commit
    per read was one per move), and the tables still equal a rebuild."""
    (game_id,) = game_ids(keys, 1, "g-batched")
    commands, _ = play_locally(game_id, 3, 41, 30)
    sender = CommandSender(redis, keys)

    async def apply(command: Any) -> None:
        await sender.send_many([command])
        result = await sender.result(game_id, command.command_id, seat=command.seat, timeout_s=30)
        assert result is not None and result.status == "accepted", result

    commits: list[int] = []

    def on_commit(_: Any) -> None:
        commits.append(1)

    event.listen(database, "commit", on_commit)
    scorer = ScoringService(redis, keys, database, commit_interval_s=10.0)
    try:
        async with running_engine(redis, keys):
            await scorer.start()
            try:
                await apply(commands[0])
                await wait_for(scorer.caught_up, timeout_s=60)  # committed: now it waits
                before = len(commits)
                for command in commands[1:]:
                    await apply(command)
                await wait_for(scorer.caught_up, timeout_s=60)
            finally:
                await scorer.close()
    finally:
        event.remove(database, "commit", on_commit)
    # Seconds at most for these commands on the slowest machine, so one commit; a second
    # if the wait ended among them. One read per command would make 29.
    assert 1 <= len(commits) - before <= 2
    assert rows(database, ScoredGame)[0]["version"] > 29
    live = dump(database)
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == live


async def test_facts_are_the_games_own_analytics_of_every_event(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """The facts table holds what the game's ``facts`` hook said of each event: for The Age
    of Discovery, every building bought (price as value) and every region discovered."""
    (game,) = game_ids(keys, 1, "g-facts")
    await play_games(redis, keys, [(game, 4, 12, None)])
    await drain(ScoringService(redis, keys, database))

    log = await EventStore(redis, keys).read(game)
    bought = [
        (e.version, e.data["seat"], e.data["building"], e.data["price"])
        for e in log
        if e.type == "building_bought"
    ]
    discovered = [
        (e.version, e.data["seat"], e.data["region"] or "deck", 0)
        for e in log
        if e.type == "free_discovery" or (e.type == "expedition" and e.data["success"])
    ]
    facts = sorted(rows(database, FactRow), key=lambda f: (f["version"], f["seq"]))
    assert bought and discovered
    assert [
        (f["version"], f["seat"], f["subject"], f["value"])
        for f in facts
        if f["kind"] == "building_bought"
    ] == bought
    assert [
        (f["version"], f["seat"], f["subject"], f["value"])
        for f in facts
        if f["kind"] == "discovery"
    ] == discovered
    assert {f["kind"] for f in facts} == {"building_bought", "discovery"}


def test_ratings_are_per_game_and_rewind_only_their_own_game(database: Engine) -> None:
    """One player in two games has two ratings; a late finisher of one game rewinds and
    re-rates that game's later games only, ending where rating in finish order ends."""
    create_tables(database)
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def finished(game: str, game_id: str, minute: int, places: list[int]) -> FinishedGame:
        moment = at + timedelta(minutes=minute)
        players = ("player:Ana", "player:Bo")
        return FinishedGame(
            game,
            finish_key(moment, game_id),
            game_id,
            moment,
            tuple(zip(players, places, strict=True)),
        )

    early, late = finished("chess", "c-1", 1, [1, 2]), finished("chess", "c-2", 2, [2, 1])
    other = finished("go", "g-1", 3, [2, 1])
    with database.begin() as conn:  # the later chess game and the go game first
        for row in (late, other):  # rate() reads the finished game's results back
            _store_finished(conn, row)
        rate(conn, [late, other])
    with database.begin() as conn:
        _store_finished(conn, early)
        rate(conn, [early])
    out_of_order = {(r["game"], r["player"]): r for r in rows(database, Rating)}

    with database.begin() as conn:  # the same games in finish order, from scratch
        for model in (Rating, RatingChange):
            conn.execute(table_of(model).delete())
        rate(conn, [early, late, other])
    in_order = {(r["game"], r["player"]): r for r in rows(database, Rating)}

    assert set(in_order) == {
        (game, player) for game in ("chess", "go") for player in ("player:Ana", "player:Bo")
    }
    assert [in_order[("chess", p)]["games"] for p in ("player:Ana", "player:Bo")] == [2, 2]
    assert in_order[("go", "player:Bo")]["games"] == 1
    assert in_order[("go", "player:Bo")]["mu"] > 25.0 > in_order[("go", "player:Ana")]["mu"]
    assert in_order[("chess", "player:Ana")]["mu"] != in_order[("go", "player:Ana")]["mu"]
    assert out_of_order == in_order
    history = rows(database, RatingChange)
    assert {(h["game"], h["game_id"]) for h in history} == {
        ("chess", "c-1"),
        ("chess", "c-2"),
        ("go", "g-1"),
    }


def _store_finished(conn: Connection, game: FinishedGame) -> None:
    """The game and result rows the projection writes for a finished game."""
    conn.execute(
        table_of(ScoredGame).insert(),
        {
            "game_id": game.game_id,
            "game": game.game,
            "version": 1,
            "status": "finished",
            "ruleset": "standard",
            "options": "{}",
            "players": len(game.places),
            "decisions": 0,
            "created_at": game.finished_at,
            "finished_at": game.finished_at,
            "finish_key": game.key,
        },
    )
    conn.execute(
        table_of(Result).insert(),
        [
            {
                "game_id": game.game_id,
                "seat": seat,
                "game": game.game,
                "player": player,
                "seat_kind": "human",
                "side": "",
                "place": place,
                "won": place == 1,
                "breakdown": "{}",
                "total": 0,
                "tiebreak": "[]",
            }
            for seat, (player, place) in enumerate(game.places)
        ],
    )


async def test_the_drivers_upserts_store_what_sqlalchemys_statement_stores(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Each table's rows of a finished and a running game, written by ``upsert`` (on SQLite
    the driver's ``executemany`` of tuples, each value through its column's processor: JSON,
    times, booleans) and then by SQLAlchemy's own execution of the same statement, are
    stored alike, byte for byte as the driver reads them back; and an upsert of a row
    already held replaces it."""
    finished, running = game_ids(keys, 2, "g-driver")
    await play_games(
        redis,
        keys,
        [(finished, 3, 7, None), (running, 4, 8, 40)],
        {finished: {"0": "bot:greedy", "1": "human", "2": "bot:random"}},
    )
    service = ScoringService(redis, keys, database)
    logs, seats = await service._read(
        [finished, running], {finished: (0, None), running: (0, None)}
    )
    projected = Rows(cells=False)
    for game_id in (finished, running):
        progress = service._begin(game_id, logs[game_id], seats)
        assert progress is not None
        service._apply(progress, logs[game_id], 0, projected)
    tables = [
        (table_of(ScoredGame), list(projected.games.values())),
        (table_of(Standing), list(projected.standings.values())),
        (table_of(Decision), projected.decisions),
        (table_of(FactRow), projected.facts),
        (table_of(Result), projected.results),
        (flat.RESULTS, projected.flat_results),
        (flat.SEAT_FACTS, projected.seat_facts),
    ]
    assert all(written for _, written in tables)
    if database.dialect.name == "sqlite":  # the driver's path is taken for every table
        assert all(_driver_upsert(database.dialect, t, frozenset(w[0])) for t, w in tables)

    def stored() -> dict[str, list[tuple[Any, ...]]]:
        with database.connect() as conn:
            return {
                t.name: sorted(
                    tuple(r) for r in conn.exec_driver_sql(f"SELECT * FROM {t.name}").all()
                )
                for t, _ in tables
            }

    with database.begin() as conn:
        for table, written in tables:
            upsert(conn, table, [{**r, **_stale(table)} for r in written])  # then replaced
            upsert(conn, table, written)
    by_upsert = stored()
    with database.begin() as conn:
        for table, written in tables:
            conn.execute(table.delete())
            conn.execute(_upsert_statement(database.dialect.name, table), written)
    assert stored() == by_upsert
    assert len(by_upsert["scoring_standings"]) == 7 and len(by_upsert["scoring_games"]) == 2


def _stale(table: Any) -> dict[str, Any]:
    """A value that the row written next must replace (a column outside the key)."""
    column = next(c for c in table.columns if not c.primary_key and c.type.python_type is int)
    return {column.key: -1}
