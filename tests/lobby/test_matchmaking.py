"""Matchmaking over real HTTP: enough players make a table; a lone player gets bots."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import Engine, event
from sqlmodel import Session

from services.lobby.db import LobbySeat, LobbyTable, LobbyTicket
from services.lobby.lobby import Lobby
from services.lobby.matchmaking import Matchmaker
from services.lobby.queue import tickets_queued
from services.lobby.tables import _claim_start
from shared.bus import Keys
from shared.games.api import DEFAULT_GAME
from tests.backbone.helpers import settings_for

from .helpers import bearer, running_lobby, wait_for_view

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


async def _matched(client: httpx.AsyncClient, ticket: str) -> dict[str, Any]:
    for _ in range(600):
        status = (await client.get(f"/queue/{ticket}")).json()
        if status["status"] == "matched":
            return status  # type: ignore[no-any-return]
        await asyncio.sleep(0.02)
    raise TimeoutError(f"ticket {ticket} was never matched")


async def test_players_with_the_same_preferences_are_seated_together(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Three players queue for a 3-player extended game (and one for a 2-player game, who
    must not join them): the three share one table of their game, in distinct seats, and it
    starts."""
    async with running_lobby(redis_url, keys, database_url, tmp_path, match_wait_s="60") as client:
        wanted = {"game": DEFAULT_GAME, "players": 3, "options": {"tile_set": "extended"}}
        tickets = [
            (await client.post("/queue", json={"name": f"p{i}", **wanted})).json()["ticket"]
            for i in range(3)
        ]
        other = (await client.post("/queue", json={"name": "x", "players": 2})).json()["ticket"]
        matched = [await _matched(client, t) for t in tickets]
        assert len({m["table_id"] for m in matched}) == 1
        assert sorted(m["seat"] for m in matched) == [0, 1, 2]
        table = (await client.get(f"/tables/{matched[0]['table_id']}")).json()
        assert table["status"] == "running" and table["options"]["tile_set"] == "extended"
        assert (table["game"], table["ruleset"]) == (DEFAULT_GAME, "standard")
        assert [s["kind"] for s in table["taken"]] == ["human"] * 3
        assert (await client.get(f"/queue/{other}")).json()["status"] == "waiting"
        view = await wait_for_view(client, table["id"], matched[0]["token"], 1)
        assert view["phase"] == "placement"


async def test_a_lone_player_is_given_bots_after_the_wait(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path, match_wait_s="0.2") as client:
        ticket = (await client.post("/queue", json={"name": "solo", "players": 4})).json()
        match = await _matched(client, ticket["ticket"])
        table = (await client.get(f"/tables/{match['table_id']}")).json()
        assert table["status"] == "running"
        assert sorted(s["kind"] for s in table["taken"]) == ["bot", "bot", "bot", "human"]
        first = await wait_for_view(client, table["id"], match["token"], 1)
        # The bots play their seats: the game moves on whenever a bot is to decide.
        while first["pending"][0]["seat"] == match["seat"]:
            legal = first["legal_commands"]
            answer = await client.post(
                f"/games/{table['id']}/commands", json=legal[0], headers=bearer(match["token"])
            )
            first = await wait_for_view(
                client, table["id"], match["token"], answer.json()["version"]
            )
        later = await wait_for_view(client, table["id"], match["token"], first["version"] + 1)
        assert later["version"] > first["version"]


async def test_a_round_looks_in_sql_only_when_a_ticket_was_queued_or_one_waits(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Issue 24: the matchmaker's round every 0.1 s was a lock, a thread hop and a SELECT
    FOR UPDATE even with nobody queued. A round after one that left no ticket waiting is
    one Redis read, until a queued ticket is signalled; while tickets wait (for others, or
    for the wait's end and its bots) every round looks."""
    statements: list[str] = []
    event.listen(database, "before_cursor_execute", lambda *a: statements.append(a[2]))
    lobby = Lobby(redis, keys, database, settings_for(keys, secret="test"))
    matchmaker = Matchmaker(lobby, wait_s=60, reconcile_s=3600)  # no reconciling rounds here
    try:
        assert await matchmaker.round() == []
        assert statements  # the first round looks: nothing is known of the queue yet
        statements.clear()
        assert await matchmaker.round() == []
        assert statements == []  # nothing queued since: no SQL
        with Session(database) as session:
            session.add(
                LobbyTicket(id="q-1", name="solo", game=DEFAULT_GAME, players=2, options="{}")
            )
            session.commit()
        await tickets_queued(lobby)
        statements.clear()
        assert await matchmaker.round() == []  # one player of two: no table yet
        assert any("lobby_tickets" in s for s in statements)
        statements.clear()
        assert await matchmaker.round() == []
        assert any("lobby_tickets" in s for s in statements)  # a ticket waits: it looks
    finally:
        await lobby.close()


async def test_unfinished_starts_are_looked_for_when_one_can_be_due(
    redis: Redis, keys: Keys, database: Engine
) -> None:
    """Issue 24 (idle CPU apart): the reconciling round looked in SQL for starts left
    unfinished every second, though a start is due only ``start_retry_s`` after it began.
    With none unfinished, the next rounds do not look; a start begun since (by another
    lobby, say) is seen through once it is due, at the round after its retry period."""
    statements: list[str] = []
    event.listen(database, "before_cursor_execute", lambda *a: statements.append(a[2]))
    lobby = Lobby(redis, keys, database, settings_for(keys, secret="test", start_retry_s=1.5))
    matchmaker = Matchmaker(lobby, wait_s=60, reconcile_s=0)  # a reconciling round each time

    def looked() -> bool:
        return any("starting_since <" in s for s in statements)

    try:
        await matchmaker.round()
        assert looked()
        statements.clear()
        await matchmaker.round()
        assert not looked()  # none unfinished: none can be due before 1.5 s from the look
        _open_table(database, "t-begun")
        _claim_start(database, "t-begun", None)  # begun, its game never created
        await asyncio.sleep(1.6)
        await matchmaker.round()
        assert looked()
        statements.clear()
        await matchmaker.round()
        assert not looked()  # sent again: due 1.5 s after that
        assert await redis.xlen(keys.commands(keys.partition("t-begun"))) == 1
    finally:
        await lobby.close()


def _open_table(db: Engine, table_id: str) -> None:
    """A full open table of two bots, as the lobby makes one."""
    with Session(db) as session:
        session.add(LobbyTable(id=table_id, ruleset="standard", options={}, seats=2, deadline_s=60))
        session.flush()
        for seat in (0, 1):
            session.add(
                LobbySeat(table_id=table_id, seat=seat, kind="bot", name="b", bot_level="random")
            )
        session.commit()
