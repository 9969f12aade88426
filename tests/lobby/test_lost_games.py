"""Running tables whose game Redis lost (issue 25: a table of bots started just before a
Redis kill -9 had nothing left in Redis while SQL had it ``running``, forever): the lobby
finds them and starts their game again; a finished or archived game's table, and one whose
game is there, are left alone. On one Redis and on the cluster (the games spread over the
shards)."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from redis.asyncio import Redis
from sqlalchemy import Engine, event
from sqlmodel import Session

from services.lobby import tables
from services.lobby.db import LobbySeat
from services.lobby.lobby import Lobby
from services.lobby.matchmaking import Matchmaker
from services.lobby.tables import start_table
from shared.bus import Keys
from shared.contracts.records import BOT_PREFIX, LEFT
from shared.eventstore import Archive, EventStore, archive_game

from ..backbone.helpers import play_to_the_end, running_engine, settings_for, wait_for
from .helpers import bots_table, lose_game, table_row


async def _first_event_id(store: EventStore, game_id: str) -> str:
    events = await store.read(game_id)
    assert events
    return events[0].event_id


async def test_a_running_table_whose_game_redis_lost_gets_its_game_again(
    any_redis: Redis, keys: Keys, database: Engine
) -> None:
    """Five running tables, their starts done: one whose game Redis lost (the engine
    still caches it, as when Redis alone crashed), one whose game runs, one finished, one
    archived, and one archived whose every trace Redis lost (its id among the archived
    ones too: the archive in SQL has it). The matchmaker's rounds start the lost one's game
    again (seats as the table says, the seat its player left to the fallback bot) and see
    its start through; the four others are not touched."""
    settings = settings_for(keys, secret="test", start_retry_s=0.01)
    lobby = Lobby(any_redis, keys, database, settings)
    store = EventStore(any_redis, keys)
    archive = Archive(database)
    redis: Any = any_redis
    try:
        async with running_engine(any_redis, keys):
            for table_id in ("t-lost", "t-kept"):
                bots_table(database, table_id, seats=3)
                await start_table(lobby, table_id, None)
            with Session(database) as session:  # its player left: the fallback bot's seat
                seat = session.get(LobbySeat, ("t-lost", 1))
                assert seat is not None
                seat.kind, seat.bot_level, seat.left = "human", None, True
                session.add(seat)
                session.commit()
            for table_id in ("t-finished", "t-archived", "t-archived-only"):
                bots_table(database, table_id, status="running", seats=3)
                await play_to_the_end(any_redis, keys, table_id)
            for table_id in ("t-archived", "t-archived-only"):
                archived = await archive_game(store, archive, table_id)
                assert archived is not None and archived.deleted
            gone = keys.archived(keys.partition("t-archived-only"))
            await redis.srem(gone, "t-archived-only")
            others = ("t-kept", "t-finished")
            before = {t: await _first_event_id(store, t) for t in others}
            versions = await store.versions(others)
            await lose_game(redis, keys, "t-lost")
            assert not await store.exists("t-lost")

            matchmaker = Matchmaker(lobby, wait_s=60, reconcile_s=0)  # reconciles each round

            async def seen_through() -> bool:
                with structlog.testing.capture_logs():
                    await matchmaker.round()
                return table_row(database, "t-lost").starting_since is None

            await wait_for(seen_through, timeout_s=30)
            assert await store.exists("t-lost")
            lost = table_row(database, "t-lost")
            assert (lost.status, lost.start_error) == ("running", "")
            seats = await store.seats(["t-lost"])
            assert seats["t-lost"].players == {
                0: f"{BOT_PREFIX}random",
                1: LEFT,
                2: f"{BOT_PREFIX}random",
            }
            created = (await store.read("t-lost"))[0]
            assert created.data["players"] == ["b", "b", "b"]

            assert {t: await _first_event_id(store, t) for t in others} == before
            assert await store.versions(others) == versions
            for table_id in ("t-archived", "t-archived-only"):
                assert not await redis.exists(keys.log(table_id), keys.meta(table_id))
                assert archive.has(table_id)
            for table_id in ("t-kept", "t-finished", "t-archived", "t-archived-only"):
                row = table_row(database, table_id)
                assert (row.status, row.starting_since) == ("running", None), table_id
    finally:
        await lobby.close()


async def test_the_running_tables_are_looked_at_in_pages_once_a_pass(
    redis: Redis, keys: Keys, database: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five started tables, pages of two: a pass looks at each table once, one page a
    round, and finds the lost game wherever it is in the pass; the next pass waits for
    ``CARAVEL_LOST_GAME_CHECK_S``, in this lobby process and in any other: the rounds
    between make no query. A table whose start is under way is the reconciler of starts'
    (never looked at here)."""
    monkeypatch.setattr(tables, "LOST_CHECK_PAGE", 2)
    settings = settings_for(keys, secret="test", lost_game_check_s=3600)
    lobby = Lobby(redis, keys, database, settings)
    statements: list[str] = []
    try:
        async with running_engine(redis, keys):
            for n in range(5):
                bots_table(database, f"t-{n}")
                await start_table(lobby, f"t-{n}", None)
            bots_table(database, "t-starting")
            tables._claim_start(database, "t-starting", None)  # its start under way
            since = table_row(database, "t-starting").starting_since
            await lose_game(redis, keys, "t-3")
            lost_games = tables.LostGames(lobby)
            event.listen(database, "before_cursor_execute", lambda *a: statements.append(a[2]))
            with structlog.testing.capture_logs() as logs:
                rounds = [await lost_games.round() for _ in range(3)]
            assert rounds == [[], ["t-3"], []]  # t-0 t-1 | t-2 t-3 | t-4 (a short page)
            warned = {e.get("table_id", e.get("game")) for e in logs if e["log_level"] == "warning"}
            assert warned == {"t-3"}  # the lobby's two, the engine's (its cached game)
            assert table_row(database, "t-starting").starting_since == since
            statements.clear()
            assert [await lost_games.round() for _ in range(3)] == [[], [], []]
            another_lobby = tables.LostGames(lobby)  # its pass is this period's, begun above
            assert await another_lobby.round() == []
            assert statements == []
            await wait_for(lambda: lobby.store.exists("t-3"))
    finally:
        await lobby.close()


async def test_a_game_whose_keys_cannot_be_read_is_not_taken_for_lost(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """A game whose reads fail (a WRONGTYPE on its partition's archived games stands in
    for a shard's fault) is not known: its table is left as it is, and looked at again at
    the next pass, which finds it lost once it can be read."""
    settings = settings_for(keys, secret="test", lost_game_check_s=0.001)
    lobby = Lobby(redis, keys, database, settings)
    try:
        async with running_engine(redis, keys):
            bots_table(database, "t-0")
            await start_table(lobby, "t-0", None)
            await lose_game(redis, keys, "t-0")
            archived = keys.archived(keys.partition("t-0"))
            await redis.set(archived, "not a set")
            lost_games = tables.LostGames(lobby)
            assert await lost_games.round() == []
            assert table_row(database, "t-0").starting_since is None
            await redis.delete(archived)

            async def started_again() -> bool:
                with structlog.testing.capture_logs():
                    return await lost_games.round() == ["t-0"]

            await wait_for(started_again)
            await wait_for(lambda: lobby.store.exists("t-0"))
    finally:
        await lobby.close()
