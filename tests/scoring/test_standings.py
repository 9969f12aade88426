"""Standings written only when a seat's score changes (issue 24), on real Redis and SQL
(SQLite, and PostgreSQL when set): whatever the batches, rolled-back batches and restarts,
the standings held after each commit are the rules' score at the version of the game's row,
the route says that version, and the tables equal a rebuild's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from sqlalchemy import Engine, event, select

from services.scoring.db import ScoredGame, Standing, clear_tables, load_checkpoints, table_of
from services.scoring.http import router
from services.scoring.projection import Rows, advance, snapshot_rows, start
from services.scoring.service import ScoringService
from shared.bus import Delivery, Keys
from shared.contracts import EventEnvelope, Notification, Seats
from shared.eventstore import EventStore, GameCodec
from shared.httpapi import install_error_handlers

from .helpers import dump, game_ids, play_games

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

FIELDS = ("seat", "player", "breakdown", "total", "place")  # a standing on the route


class Played:
    """Games played through the engine: the partition streams' entries (each "this game
    reached version v"), every stream's in order, streams interleaved, and the logs."""

    def __init__(
        self,
        deliveries: list[Delivery],
        logs: dict[str, list[EventEnvelope]],
        seats: dict[str, Seats],
    ) -> None:
        self.deliveries, self.logs, self.seats = deliveries, logs, seats

    def standings(self, game_id: str, version: int) -> list[dict[str, Any]]:
        """The standings of a game projected from nothing up to ``version`` (every seat)."""
        events = self.logs[game_id]
        progress = start(GameCodec(), events[0], self.seats[game_id])
        for e in events[:version]:
            advance(progress, e, None)
        rows = Rows()
        snapshot_rows(progress, rows)
        return sorted(rows.standings.values(), key=lambda r: r["seat"])


async def _play(redis: Redis, keys: Keys) -> Played:
    """One finished game and two running ones."""
    finished, running, short = game_ids(keys, 3, "g-standings")
    await play_games(
        redis,
        keys,
        [(finished, 2, 11, None), (running, 4, 12, 70), (short, 3, 13, 40)],
        {finished: {"0": "bot:greedy", "1": "human"}},
    )
    per_stream: list[list[Delivery]] = []
    for p in keys.all_partitions():
        stream = keys.events(p)
        entries: Any = await redis.xrange(stream)
        per_stream.append([Delivery(stream, i.decode(), fields) for i, fields in entries])
    longest = max(len(s) for s in per_stream)
    deliveries = [s[i] for i in range(longest) for s in per_stream if i < len(s)]
    store = EventStore(redis, keys)
    games = [finished, running, short]
    logs = await store.read_many(dict.fromkeys(games, (0, None)))
    return Played(deliveries, logs, await store.seats(games))


def _service(redis: Redis, keys: Keys, database: Engine) -> ScoringService:
    """A scoring service from its checkpoints in SQL, not following the streams: the test
    hands it the entries (those it has read already it skips, as after a set-back)."""
    service = ScoringService(redis, keys, database)
    with database.begin() as conn:
        service.positions = load_checkpoints(conn, service.streams)
    return service


@asynccontextmanager
async def _route(database: Engine) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the scoring router's standings route on ``database``."""
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(router)
    app.state.db = database
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        yield client


async def _check(database: Engine, played: Played, client: httpx.AsyncClient) -> None:
    """Every game's standings in SQL and on the route are its score at its row's version."""
    games, table = table_of(ScoredGame), table_of(Standing)
    with database.connect() as conn:
        versions = {g: v for g, v in conn.execute(select(games.c.game_id, games.c.version))}
        held = [dict(r._mapping) for r in conn.execute(select(table).order_by(table.c.seat))]
    for game_id, version in versions.items():
        expected = played.standings(game_id, version)
        assert [r for r in held if r["game_id"] == game_id] == expected, (game_id, version)
        route = (await client.get(f"/games/{game_id}/standings")).json()
        assert route["version"] == version
        assert route["standings"] == _shown(expected)


PLAYED: dict[str, Played] = {}  # per test namespace: the games are played once per test
STEPS = st.lists(
    st.tuples(st.integers(1, 15), st.sampled_from(["a", "a", "a", "b", "restart"])),
    min_size=1,
    max_size=30,
)
"""A plan: how many more entries each step reaches, and who scores up to there: the service
``a``; a second service ``b`` on the same database (behind the checkpoints, its batch rolls
back and forgets its games; at them, it scores on and leaves ``a`` behind); or ``a`` started
again (nothing in memory)."""


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
async def test_standings_after_every_commit_are_the_score_at_the_games_version(
    redis: Redis, keys: Keys, database: Engine, steps: list[tuple[int, str]]
) -> None:
    """Entries scored in batches of any size by two services on one database, batches
    rolled back and a service started again: after every step each game's standings rows
    and its standings route are the rules' score at the version of the game's row (no
    changed score left unwritten, no version older than the row's), and once all is scored
    the tables equal a rebuild's."""
    if keys.prefix not in PLAYED:
        PLAYED[keys.prefix] = await _play(redis, keys)
    played = PLAYED[keys.prefix]
    clear_tables(database)
    services = {"a": _service(redis, keys, database), "b": _service(redis, keys, database)}
    upto = 0
    async with _route(database) as client:
        for size, who in steps:
            upto = min(upto + size, len(played.deliveries))
            if who == "restart":
                services["a"] = _service(redis, keys, database)
                continue
            await services[who].score(played.deliveries[:upto])
            await _check(database, played, client)
        for _ in range(2):  # a first batch may roll back (b moved on): then read on
            await services["a"].score(played.deliveries)
        await _check(database, played, client)
    live = dump(database)
    await ScoringService(redis, keys, database).rebuild()
    assert dump(database) == live


def _shown(standings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Standings as the route shows them."""
    return [{k: r[k] for k in FIELDS} for r in standings]


def _standings_written(database: Engine) -> list[int]:
    """Counts, into the list returned, the standings rows each statement writes."""
    written: list[int] = []

    def count(*args: Any) -> None:
        statement, parameters, many = args[2], args[3], args[5]
        if "INTO scoring_standings" in statement:
            written.append(len(parameters) if many else 1)

    event.listen(database, "before_cursor_execute", count)
    return written


async def test_a_batch_that_changes_no_score_writes_no_standing(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Entries scored one at a time: a batch writes the standings rows of the seats whose
    score it changed and no other (every seat's row was written again for its new version
    before), and the route's version is the game's row's even when no standing was
    written."""
    played = await _play(redis, keys)
    service = _service(redis, keys, database)
    written = _standings_written(database)
    versions: dict[str, int] = {}
    unchanged = changed = 0
    async with _route(database) as client:
        for i in range(len(played.deliveries)):
            note = Notification.from_fields(played.deliveries[i].fields)
            before = versions.get(note.game_id)
            old = _shown(played.standings(note.game_id, before)) if before else []
            new = _shown(played.standings(note.game_id, note.version))
            moved = [s for s in new if s not in old]
            del written[:]
            assert await service.score(played.deliveries[i : i + 1]) == 1
            assert sum(written) == len(moved)
            unchanged, changed = unchanged + (not moved), changed + bool(moved)
            versions[note.game_id] = note.version
            route = (await client.get(f"/games/{note.game_id}/standings")).json()
            assert route["version"] == note.version
            assert route["standings"] == new
    assert unchanged > 10 and changed > 10  # both cases were seen
