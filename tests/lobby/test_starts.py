"""Starts that fail on the way: no table stays ``running`` without a game. A start left
unfinished (the lobby killed between marking the table and creating the game) is sent again
by the lobby's reconciler; one the engine refuses reopens the table with the reason."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine
from sqlmodel import Session

from services.lobby.db import LobbySeat, LobbyTable
from services.lobby.tables import _claim_start
from shared.bus import Keys

from ..backbone.helpers import wait_for
from .helpers import running_lobby


def _table(db: Engine, table_id: str, ruleset: str = "standard") -> None:
    """A full table of two bots, open, as the lobby makes one."""
    with Session(db) as session:
        table = LobbyTable(id=table_id, ruleset=ruleset, options={}, seats=2, deadline_s=60)
        session.add(table)
        session.flush()
        for seat in (0, 1):
            session.add(
                LobbySeat(table_id=table_id, seat=seat, kind="bot", name="b", bot_level="random")
            )
        session.commit()


async def _until(client: httpx.AsyncClient, table_id: str, done: Any) -> dict[str, Any]:
    """The table once ``done(table)`` holds."""
    seen: dict[str, Any] = {}

    async def there() -> bool:
        seen.update((await client.get(f"/tables/{table_id}")).json())
        return bool(done(seen))

    await wait_for(there, timeout_s=30)
    return seen


async def test_a_start_cut_short_is_finished_and_one_refused_reopens_the_table(
    redis_url: str, keys: Keys, database: Engine, database_url: str, tmp_path: Path
) -> None:
    _table(database, "t-cut-short")
    _claim_start(database, "t-cut-short", None)  # the lobby died right after this step
    _table(database, "t-refused", ruleset="no-such-ruleset")  # the engine refuses its game
    _claim_start(database, "t-refused", None)

    serve = running_lobby(redis_url, keys, database_url, tmp_path, start_retry_s="0.5")
    async with serve as client:
        assert (await client.get("/tables/t-cut-short")).json()["status"] == "running"
        for _ in range(600):
            if (await client.get("/games/t-cut-short/view")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the game of the start cut short was never created")

        refused = await _until(client, "t-refused", lambda t: t["status"] == "open")
        assert refused["start_error"] and "ruleset" in refused["start_error"]
        assert (await client.get("/games/t-refused/view")).status_code == 404
        cut_short = (await client.get("/tables/t-cut-short")).json()
        assert cut_short["status"] in ("running", "finished")  # random bots play fast
        assert cut_short["start_error"] is None
