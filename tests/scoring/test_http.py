"""Scoring over real HTTP: `caravel up` runs the engine, the scoring service and the API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from shared.bus import Keys
from shared.games import age_of_discovery as aod

from ..lobby.helpers import running_lobby
from .helpers import game_ids, play_games

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL

GAME = "age_of_discovery"
PARTS = ["colonies", "discoveries", "buildings", "economy"]


async def finished_result(client: httpx.AsyncClient, game_id: str) -> dict[str, Any]:
    for _ in range(2000):
        response = await client.get(f"/games/{game_id}/result")
        if response.status_code == 200:
            return response.json()  # type: ignore[no-any-return]
        await asyncio.sleep(0.01)
    raise TimeoutError(f"no result for {game_id}")


async def test_standings_results_leaderboard_and_dashboard(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A finished game's standings and result are the rules' score, the leaderboard ranks
    its players, the summary counts it, and a running game has standings but no result."""
    done, running = game_ids(keys, 2, "g-http")
    seats = {done: {"0": "human", "1": "bot:greedy", "2": "bot:random"}}
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        unknown = await client.get("/games/nope/standings")
        assert unknown.status_code == 404
        assert unknown.json() == {
            "code": "unknown_game",
            "message": "scoring knows no game nope (yet)",
            "details": {},
        }
        played = await play_games(
            redis, keys, [(done, 3, 8, None), (running, 2, 9, 30)], seats, engine=False
        )
        result = await finished_result(client, done)
        expected = aod.score(played[done][1])
        assert [(r["seat"], r["total"], r["place"]) for r in result["results"]] == [
            (r["seat"], r["total"], r["place"]) for r in expected
        ]
        assert result["winners"] == [r["seat"] for r in expected if r["place"] == 1]
        assert result["game"] == GAME
        assert [r["breakdown"] for r in result["results"]] == [
            {k: r[k] for k in PARTS} for r in expected
        ]
        standings = (await client.get(f"/games/{done}/standings")).json()
        assert standings["status"] == "finished" and standings["game"] == GAME
        assert [s["breakdown"]["economy"] for s in standings["standings"]] == [
            r["economy"] for r in expected
        ]

        for _ in range(2000):  # the running game's notifications come after the finished one
            live = await client.get(f"/games/{running}/standings")
            if live.status_code == 200 and live.json()["version"] == played[running][1].version:
                break
            await asyncio.sleep(0.01)
        assert live.json()["status"] == "running"
        assert [s["total"] for s in live.json()["standings"]] == [
            r["total"] for r in aod.score(played[running][1])
        ]
        not_yet = await client.get(f"/games/{running}/result")
        assert not_yet.status_code == 409 and not_yet.json()["code"] == "game_not_finished"

        board = (await client.get("/leaderboard")).json()
        assert [row["rank"] for row in board] == list(range(1, len(board) + 1))
        assert [row["ordinal"] for row in board] == sorted(
            (r["ordinal"] for r in board), reverse=True
        )
        winner = next(r for r in result["results"] if r["place"] == 1)
        assert board[0]["player"] == winner["player"]  # one game each: the winner leads
        bots = (await client.get("/leaderboard", params={"kind": "bot"})).json()
        assert {row["player"] for row in bots} == {"bot:greedy", "bot:random"}
        named = (await client.get("/leaderboard", params={"game": GAME})).json()
        assert named == board  # the default game's leaderboard
        bad = await client.get("/leaderboard", params={"limit": 0})
        assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
        chess = await client.get("/leaderboard", params={"game": "chess"})
        assert chess.status_code == 422 and chess.json()["code"] == "unsupported_game"
        assert GAME in chess.json()["details"]["known"]

        summary = (await client.get("/analytics/summary")).json()
        assert list(summary["games"]) == [GAME]  # a section per game
        section = summary["games"][GAME]
        assert section["games_finished"] == 1 and section["games_running"] == 1
        assert set(section["win_rate_by_side"]) == {"England", "France", "Spain"}
        assert set(section["win_rate_by_seat_kind"]) == {"human", "bot:greedy", "bot:random"}
        assert list(section["mean_breakdown"]) == [*PARTS, "total"]
        bought = sum(r["facts"].get("building_bought", 0) for r in result["results"])
        assert bought > 0
        assert sum(b["count"] for b in section["facts"]["building_bought"]) == bought
        page = await client.get("/analytics")
        assert page.headers["content-type"].startswith("text/html")
        assert "/static/js/analytics.js" in page.text and "Analytics" in page.text
