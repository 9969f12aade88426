"""A seat's legal commands over HTTP (``GET /legal``, ``POST /commands?legal=true``):
the rules' own for that seat at the log's version, read-your-writes, and answered from the
engine's decision requests, without the views projection (issue 24)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore, GameCodec
from shared.games import api

from .helpers import SEATS_FROM_ONE_ADDRESS, bearer, running_lobby


class Rules:
    """The game's state as its log has it, followed event by event (server side: the test
    knows what every seat may do)."""

    def __init__(self, store: EventStore, game_id: str) -> None:
        self.store, self.game_id, self.codec = store, game_id, GameCodec()
        self.state: Any = None
        self.version = 0

    async def at(self, version: int) -> None:
        for event in await self.store.read(self.game_id, self.version):
            if event.version > version:
                break
            if self.state is None:
                self.state = self.codec.initial(event)
            else:
                self.codec.apply(self.state, event)
            self.version = event.version
        assert self.version == version

    def legal(self, seat: int) -> dict[str, Any]:
        game = api.of(self.state)
        commands = [c.to_dict() for c in game.legal_commands(self.state, seat)]
        over = game.is_over(self.state)
        return {"version": self.version, "seat": seat, "legal_commands": commands, "finished": over}


async def _legal(client: httpx.AsyncClient, game: str, token: str, after: int) -> Any:
    answer = await client.get(
        f"/games/{game}/legal", params={"after_version": after}, headers=bearer(token)
    )
    assert answer.status_code == 200, answer.json()
    return answer.json()


@pytest.mark.parametrize("game_name", ["age_of_discovery", "navegador"])
async def test_each_seats_legal_commands_are_the_rules_at_the_logs_version(
    redis: Redis,
    redis_url: str,
    keys: Keys,
    database_url: str,
    tmp_path: Path,
    game_name: str,
) -> None:
    """Two humans play a whole game over HTTP, each move ``POST ?legal=true`` plus the
    other seat's ``GET /legal?after_version=``: every answer is, for its seat alone, the
    rules' legal commands at the log's version (no other seat's commands; empty off turn),
    ``finished`` once the game is over. And no move asked for the game's views: the view
    the table's start projected is never projected again (before, every HTTP read of the
    legal commands had the views projection project the game at each of its events)."""
    store = EventStore(redis, keys)
    async with running_lobby(
        redis_url, keys, database_url, tmp_path, **SEATS_FROM_ONE_ADDRESS
    ) as client:
        table = (await client.post("/tables", json={"seats": 2, "game": game_name})).json()
        joined = [
            (await client.post(f"/tables/{table['id']}/join", json={"name": n})).json()
            for n in ("A", "B")
        ]
        tokens = [j["token"] for j in joined]
        game = table["id"]
        started = await client.post(f"/tables/{game}/start", headers=bearer(tokens[0]))
        assert started.status_code == 200, started.json()
        rules, rng, moves = Rules(store, game), random.Random(7), 0
        version = start = await store.version(game)
        await rules.at(start)
        answers = [await _legal(client, game, t, version) for t in tokens]
        for _ in range(3000):
            assert answers == [rules.legal(0), rules.legal(1)]
            if answers[0]["finished"]:
                break
            seat = 0 if answers[0]["legal_commands"] else 1
            command = rng.choice(answers[seat]["legal_commands"])
            moved = await client.post(
                f"/games/{game}/commands",
                params={"legal": "true"},
                json=command,
                headers=bearer(tokens[seat]),
            )
            assert moved.status_code == 200, moved.json()
            version, moves = moved.json()["version"], moves + 1
            await rules.at(await store.version(game))  # any automatic events after it too
            mine = moved.json()["legal"]
            assert mine == rules.legal(seat) and rules.version == version  # nobody else moved
            other = await _legal(client, game, tokens[1 - seat], version)
            answers = [other, mine] if seat else [mine, other]
            answers[seat] = await _legal(client, game, tokens[seat], version)
        else:
            raise AssertionError("the game did not end")
        assert moves > 20 and answers[0]["finished"] and answers[1]["finished"]
        projected = await redis.hget(keys.view(game), "version")
        assert projected is not None and int(projected) <= start < rules.version
