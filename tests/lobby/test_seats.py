"""Who holds a seat: a token dies with its holder's leaving, one name takes one seat, and a
table of bots starts by itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.asyncio import Redis

from shared.bus import Keys

from .helpers import bearer, running_lobby, wait_for_view

pytestmark = pytest.mark.every_database  # SQL semantics: SQLite and PostgreSQL


async def test_a_token_given_up_by_leaving_acts_for_no_one(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A player joins and leaves before the start; with the old token they can neither
    start the table, nor make the seat's next holder leave, nor act for them."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        at = f"/tables/{table['id']}"
        old = (await client.post(f"{at}/join", json={"name": "Eve", "seat": 0})).json()
        assert (await client.post(f"{at}/leave", headers=bearer(old["token"]))).status_code == 200
        new = (await client.post(f"{at}/join", json={"name": "Ana", "seat": 0})).json()
        for action in ("start", "leave"):  # the table is full now: only the holder may
            refused = await client.post(f"{at}/{action}", headers=bearer(old["token"]))
            assert refused.status_code == 403 and refused.json()["code"] == "not_seated"
        after = (await client.get(at)).json()
        assert after["status"] == "open"
        assert [s["name"] for s in after["taken"]] == ["Ana", "Random bot 2"]

        started = await client.post(f"{at}/start", headers=bearer(new["token"]))
        assert started.status_code == 200, started.text
        view = await wait_for_view(client, table["id"], new["token"], 1)
        game = f"/games/{table['id']}"
        for path in ("view", "legal"):
            refused = await client.get(f"{game}/{path}", headers=bearer(old["token"]))
            assert refused.status_code == 403 and refused.json()["code"] == "not_seated"
        move = (view["legal_commands"] or [{"type": "pass"}])[0]
        refused = await client.post(f"{game}/commands", json=move, headers=bearer(old["token"]))
        assert refused.status_code == 403 and refused.json()["code"] == "not_seated"
        mine = await client.get(f"{game}/legal", headers=bearer(new["token"]))
        assert mine.status_code == 200


async def test_one_name_holds_one_seat_at_a_table(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 3})).json()
        at = f"/tables/{table['id']}"
        assert (await client.post(f"{at}/join", json={"name": "Ana"})).status_code == 201
        twice = await client.post(f"{at}/join", json={"name": "Ana", "seat": 2})
        assert twice.status_code == 409 and twice.json()["code"] == "name_taken"
        assert [s["name"] for s in (await client.get(at)).json()["taken"]] == ["Ana"]
        assert (await client.post(f"{at}/join", json={"name": "ana"})).status_code == 201


async def test_one_name_rushing_a_table_gets_one_seat(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Five joins under one name at once: one seat, four name_taken (the database's unique
    index decides the races the join's own check cannot see)."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        at = f"/tables/{(await client.post('/tables', json={'seats': 5})).json()['id']}"
        answers = await asyncio.gather(
            *(client.post(f"{at}/join", json={"name": "Ana"}) for _ in range(5))
        )
        assert sorted(a.status_code for a in answers) == [201, 409, 409, 409, 409]
        assert {a.json()["code"] for a in answers if a.status_code == 409} == {"name_taken"}
        assert [s["name"] for s in (await client.get(at)).json()["taken"]] == ["Ana"]


async def test_a_table_of_bots_starts_at_once_and_is_finished_when_its_game_ends(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        bots = {"0": "random", "1": "random"}
        created = await client.post("/tables", json={"seats": 2, "bots": bots})
        assert created.status_code == 201 and created.json()["status"] == "running"
        table = created.json()["id"]
        for _ in range(6000):
            if (await client.get(f"/tables/{table}")).json()["status"] == "finished":
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the game of bots never finished")
        running = (await client.get("/tables", params={"status": "running"})).json()
        finished = (await client.get("/tables", params={"status": "finished"})).json()
        assert table not in {t["id"] for t in running}
        assert table in {t["id"] for t in finished}
        events = (await client.get(f"/games/{table}/view")).json()
        assert events["version"] > 2


async def test_a_command_id_sent_again_with_another_command_is_refused(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """A retry (same id, same command) gets the first answer; the same id with another
    command gets 409 command_id_reused rather than the first command's answer."""
    async with running_lobby(redis_url, keys, database_url, tmp_path) as client:
        table = (await client.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        me = (await client.post(f"/tables/{table['id']}/join", json={"name": "Ana"})).json()
        await client.post(f"/tables/{table['id']}/start", headers=bearer(me["token"]))
        await wait_for_view(client, table["id"], me["token"], 1)
        commands, auth = f"/games/{table['id']}/commands", bearer(me["token"])
        first = await client.post(commands, json={"type": "bid", "command_id": "c1"}, headers=auth)
        assert first.status_code == 422 and first.json()["code"] == "malformed"
        again = await client.post(commands, json={"type": "bid", "command_id": "c1"}, headers=auth)
        assert again.status_code == 422 and again.json()["code"] == "malformed"
        other = {"type": "bid", "amount": 0, "command_id": "c1"}
        reused = await client.post(commands, json=other, headers=auth)
        assert reused.status_code == 409 and reused.json()["code"] == "command_id_reused"


async def test_a_left_holders_token_is_refused_by_every_lobby_process(
    redis: Redis, redis_url: str, keys: Keys, database_url: str, tmp_path: Path
) -> None:
    """Two lobby processes on one Redis and database: the holder's token works on both;
    they leave through the first, and the second refuses the token at once (the holder is
    kept beside the seats in Redis, not in one process's memory)."""
    shared = {"secret": "one key for both lobbies"}
    async with (
        running_lobby(redis_url, keys, database_url, tmp_path / "a", **shared) as first,
        running_lobby(
            redis_url, keys, database_url, tmp_path / "b", command="lobby", **shared
        ) as second,
    ):
        table = (await first.post("/tables", json={"seats": 2, "bots": {"1": "random"}})).json()
        at = f"/tables/{table['id']}"
        eve = (await first.post(f"{at}/join", json={"name": "Eve", "seat": 0})).json()
        started = await second.post(f"{at}/start", headers=bearer(eve["token"]))
        assert started.status_code == 200, started.text
        game = f"/games/{table['id']}"
        for client in (first, second):
            assert (await client.get(f"{game}/legal", headers=bearer(eve["token"]))).is_success
        assert (await first.post(f"{at}/leave", headers=bearer(eve["token"]))).is_success
        for client in (second, first):
            for path in ("view", "legal"):
                refused = await client.get(f"{game}/{path}", headers=bearer(eve["token"]))
                assert refused.status_code == 403 and refused.json()["code"] == "not_seated"
        assert await redis.hget(keys.holders(table["id"]), "0") == b"-"
