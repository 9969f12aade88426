"""What a client can rely on between its requests, over real HTTP: it reads its own writes
(a read that names the version it was told is never older), a started table's game can be
read at once, and a finished game says so."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from shared.bus import Keys
from shared.eventstore import EventStore
from shared.games import api

from .helpers import bearer, running_lobby


async def _legal(client: httpx.AsyncClient, game: str, token: str, after: int) -> dict[str, Any]:
    answer = await client.get(
        f"/games/{game}/legal", params={"after_version": after}, headers=bearer(token)
    )
    assert answer.status_code == 200, answer.json()
    return answer.json()  # type: ignore[no-any-return]


async def _two_humans_started(client: httpx.AsyncClient) -> tuple[str, list[str]]:
    """A two-seat table joined by Ana and Bo and started: its game and their tokens."""
    table = (await client.post("/tables", json={"seats": 2, "deadline_s": 3600})).json()
    game = table["id"]
    tokens = [
        (await client.post(f"/tables/{game}/join", json={"name": n})).json()["token"]
        for n in ("Ana", "Bo")
    ]
    started = await client.post(f"/tables/{game}/start", headers=bearer(tokens[0]))
    assert started.status_code == 200, started.json()
    return game, tokens


async def test_a_client_reads_its_own_writes_in_a_burst_of_moves(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Two human seats send 45 moves as fast as answers come: after each accepted command
    (version V), both seats' /legal and the mover's /view asked with ``after_version=V``
    show exactly V (only these two move), the commands they list are never refused as out
    of turn, and an answer asked with ``?legal=true`` carries what /legal says next."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        game, tokens = await _two_humans_started(client)
        rng, told = random.Random(7), None
        version = (await _legal(client, game, tokens[0], 1))["version"]  # the game's start
        for move in range(45):
            legal = await asyncio.gather(*(_legal(client, game, t, version) for t in tokens))
            assert [seat["version"] for seat in legal] == [version] * 2
            assert not any(seat["finished"] for seat in legal)
            if told is not None:  # what the last answer carried is what /legal says now
                assert told == legal[told["seat"]]
            seat = next(s for s, seat in enumerate(legal) if seat["legal_commands"])
            if move % 5 == 0:
                view = await client.get(
                    f"/games/{game}/view",
                    params={"after_version": version},
                    headers=bearer(tokens[seat]),
                )
                assert view.json()["version"] == version
                assert view.json()["legal_commands"] == legal[seat]["legal_commands"]
            answer = await client.post(
                f"/games/{game}/commands",
                params={"legal": "true"} if move % 2 else {},
                json=rng.choice(legal[seat]["legal_commands"]),
                headers=bearer(tokens[seat]),
            )
            assert answer.status_code == 200, answer.json()  # never out_of_turn
            assert answer.json()["status"] == "accepted" and answer.json()["version"] > version
            version, told = answer.json()["version"], answer.json()["legal"]
            assert (told is None) == (move % 2 == 0)
            assert told is None or told["version"] == version

        # A version the log reaches while the read waits is answered (a client's own version
        # ahead of a log that went back, written again meanwhile: issue 25); one the game
        # never reached is refused once the wait is over; an unknown game is a 404.
        legal = await asyncio.gather(*(_legal(client, game, t, version) for t in tokens))
        seat = next(s for s, seat in enumerate(legal) if seat["legal_commands"])
        other = tokens[1 - seat]
        waiting = asyncio.create_task(
            client.get(
                f"/games/{game}/legal", params={"after_version": version + 1}, headers=bearer(other)
            )
        )
        await asyncio.sleep(0.3)  # the read waits for a version the log has not reached
        move = rng.choice(legal[seat]["legal_commands"])
        mover = bearer(tokens[seat])
        moved = await client.post(f"/games/{game}/commands", json=move, headers=mover)
        assert moved.status_code == 200, moved.text
        version = moved.json()["version"]
        reached = await waiting
        assert reached.status_code == 200, reached.text
        assert reached.json()["version"] == version
        ahead = await client.get(
            f"/games/{game}/legal", params={"after_version": version + 1}, headers=bearer(tokens[0])
        )
        assert ahead.status_code == 409 and ahead.json()["code"] == "version_ahead"
        assert ahead.json()["details"] == {"version": version}
        unknown = await client.get("/games/g-nope/view", params={"after_version": 3})
        assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_game"


async def test_a_finished_game_says_so(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A human who never moves (a deadline of 10 ms: the fallback bot plays each of its
    moves) against a bot: until the end, /legal says ``finished: false``; once the game is
    over it says ``finished: true`` with no commands at the game's last version, and the
    table's status is ``finished``."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        body = {"seats": 2, "bots": {"1": "random"}, "deadline_s": 0.01}
        table = (await client.post("/tables", json=body)).json()
        game = table["id"]
        token = (await client.post(f"/tables/{game}/join", json={"name": "Ana"})).json()["token"]
        assert (await client.post(f"/tables/{game}/start", headers=bearer(token))).is_success
        assert (await client.get(f"/tables/{game}")).json()["status"] == "running"
        seen, legal = set(), await _legal(client, game, token, 1)
        for _ in range(3000):
            if legal["finished"]:
                break
            seen.add(legal["finished"])
            await asyncio.sleep(0.01)
            legal = await _legal(client, game, token, legal["version"])
        assert seen == {False} and legal["finished"] and legal["legal_commands"] == []
        last = await EventStore(redis, keys).last_event(game)
        assert last is not None and last.type == api.GAME_ENDED
        assert legal["version"] == last.version
        assert (await client.get(f"/tables/{game}")).json()["status"] == "finished"
        finished = (await client.get("/tables", params={"status": "finished"})).json()
        assert game in [t["id"] for t in finished]


async def test_a_started_table_s_game_can_be_read_at_once(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Tables started together (by their human, and tables of bots only, which start when
    opened): the first read of each game right after the start's answer finds it; never a
    404 ``unknown_game``."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:

        async def start_and_read(n: int) -> tuple[int, int]:
            bots = {"1": "random"}
            table = (await client.post("/tables", json={"seats": 2, "bots": bots})).json()
            token = (await client.post(f"/tables/{table['id']}/join", json={"name": "a"})).json()
            started = await client.post(
                f"/tables/{table['id']}/start", headers=bearer(token["token"])
            )
            legal = await client.get(f"/games/{table['id']}/legal", headers=bearer(token["token"]))
            return started.status_code, legal.status_code

        async def open_bots_and_read(n: int) -> tuple[int, int]:
            bots = {"0": "random", "1": "random"}
            table = await client.post("/tables", json={"seats": 2, "bots": bots})
            view = await client.get(f"/games/{table.json()['id']}/view")
            return table.status_code, view.status_code

        answers = await asyncio.gather(
            *(start_and_read(n) for n in range(8)), *(open_bots_and_read(n) for n in range(4))
        )
        assert answers == [(200, 200)] * 8 + [(201, 200)] * 4


async def test_a_seat_polling_with_the_version_it_knew_sees_the_other_seats_move(
    redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A client polls /legal with the last version it knew (``after_version``: its own last
    move's, as the chaos benchmark's players do) while another seat moves. Such a read
    keeps the game's views wanted, as a read without a version does, so the other seat's
    move shows. Before, a read whose view had reached ``after_version`` never asked: a game
    no one else read (two humans; the bot's ask lost in a failover) showed its old version
    for good, and its next player waited on a move already made (the chaos benchmark's
    stuck games under master kills)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        game, tokens = await _two_humans_started(client)
        legal = [await _legal(client, game, t, 1) for t in tokens]
        mover = next(s for s, seat in enumerate(legal) if seat["legal_commands"])
        answer = await client.post(
            f"/games/{game}/commands",
            json=legal[mover]["legal_commands"][0],
            headers=bearer(tokens[mover]),
        )
        assert answer.status_code == 200, answer.json()
        moved = answer.json()["version"]
        other = tokens[1 - mover]
        seen = (await _legal(client, game, other, 1))["version"]
        for _ in range(200):  # the projection follows a little behind: 10 s and more
            if seen >= moved:
                break
            await asyncio.sleep(0.05)
            seen = (await _legal(client, game, other, 1))["version"]
        assert seen >= moved, f"the other seat still sees version {seen} < {moved}"
