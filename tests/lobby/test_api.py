"""The lobby's HTTP API over real HTTP, with the engine and the views projection running."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import httpx
from redis.asyncio import Redis

from services.ai.bots import GreedyBot
from shared.bus import Keys

from .helpers import bearer, running_lobby, wait_for_view


async def test_concurrent_joins_never_share_a_seat(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Twelve players rush a four-seat table: four get distinct seats, the rest are told
    the table is full; nobody is seated twice and the table never overflows."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 4})).json()
        answers = await asyncio.gather(
            *(client.post(f"/tables/{table['id']}/join", json={"name": f"p{i}"}) for i in range(12))
        )
        seated = [a.json()["seat"] for a in answers if a.status_code == 201]
        refused = [a.json()["code"] for a in answers if a.status_code != 201]
        assert sorted(seated) == [0, 1, 2, 3]
        assert set(refused) <= {"table_full", "table_busy"} and len(refused) == 8
        after = (await client.get(f"/tables/{table['id']}")).json()
        assert [s["seat"] for s in after["taken"]] == [0, 1, 2, 3]


async def test_one_human_and_bots_play_a_whole_game_through_the_api(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A scripted human (greedy choices from the seat's own view) and three seats played
    through the API by bot-level players reach the end of the game."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 4})).json()
        tokens = []
        for i in range(4):
            joined = await client.post(f"/tables/{table['id']}/join", json={"name": f"p{i}"})
            assert joined.status_code == 201
            tokens.append(joined.json()["token"])
        started = await client.post(f"/tables/{table['id']}/start", headers=bearer(tokens[0]))
        assert started.status_code == 200 and started.json()["status"] == "running"
        game = table["id"]
        bot, rng = GreedyBot(), random.Random(1)
        version, moves = 1, 0
        while True:
            view = await wait_for_view(client, game, tokens[0], version)
            if view["phase"] == "over":
                break
            seat = view["pending"][0]["seat"]
            mine = await wait_for_view(client, game, tokens[seat], version)
            command = bot.choose(mine, rng)
            answer = await client.post(
                f"/games/{game}/commands", json=command, headers=bearer(tokens[seat])
            )
            assert answer.status_code == 200, answer.json()
            version = answer.json()["version"]
            moves += 1
        assert moves > 100
        assert [row["place"] for row in view["scores"]] and view["turn"] == 8


async def test_seat_tokens_and_bad_input(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A token acts only for its own seat and table; bad input of every kind gets a 4xx
    with the error shape, and changes nothing."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 2})).json()
        other = (await client.post("/tables", json={"seats": 2})).json()
        a = (await client.post(f"/tables/{table['id']}/join", json={"name": "A"})).json()
        b = (await client.post(f"/tables/{table['id']}/join", json={"name": "B"})).json()
        game = table["id"]
        await client.post(f"/tables/{game}/start", headers=bearer(a["token"]))
        view = await wait_for_view(client, game, a["token"], 1)
        on_turn = view["pending"][0]["seat"]
        waiting = [a, b][1 - on_turn]
        move = {"type": "place", "unit": "colonist", "box": "shipping"}

        async def expect(response: httpx.Response, status: int, code: str) -> None:
            body = response.json()
            assert response.status_code == status, body
            assert body["code"] == code and body["message"] and "details" in body

        await expect(
            await client.post(
                f"/games/{game}/commands", json=move, headers=bearer(waiting["token"])
            ),
            409,
            "out_of_turn",
        )
        await expect(await client.post(f"/games/{game}/commands", json=move), 401, "missing_token")
        forged = waiting["token"][:-2] + ("AA" if not waiting["token"].endswith("AA") else "BB")
        await expect(
            await client.post(f"/games/{game}/commands", json=move, headers=bearer(forged)),
            401,
            "invalid_token",
        )
        await expect(
            await client.post(
                f"/games/{other['id']}/commands", json=move, headers=bearer(a["token"])
            ),
            403,
            "wrong_table",
        )
        await expect(
            await client.post(
                f"/games/{game}/commands",
                content=b"{not json",
                headers={**bearer(a["token"]), "content-type": "application/json"},
            ),
            422,
            "invalid_request",
        )
        await expect(
            await client.post(
                f"/games/{game}/commands", json={"type": "fly"}, headers=bearer(a["token"])
            ),
            422,
            "unknown_command",
        )
        await expect(await client.get("/tables/nope"), 404, "unknown_table")
        await expect(await client.post("/tables", json={"seats": 9}), 422, "invalid_request")
        await expect(
            await client.post("/tables", json={"seats": 3, "options": {"speed": "fast"}}),
            422,
            "bad_options",
        )
        await expect(
            await client.post(f"/tables/{game}/join", json={"name": "C"}), 409, "table_not_open"
        )
        after = await wait_for_view(client, game, a["token"], 1)
        assert after["version"] == view["version"]  # nothing above changed the game
        # A seat's view carries its own legal commands only.
        assert (await client.get(f"/games/{game}/legal", headers=bearer(waiting["token"]))).json()[
            "legal_commands"
        ] == []
        spectator = (await client.get(f"/games/{game}/view")).json()
        assert "legal_commands" not in spectator and spectator["seat"] is None
