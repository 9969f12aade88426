"""A whole game on the Redis Cluster: `caravel up` with ``CARAVEL_REDIS_URL`` naming the
session's cluster (engine, views projection, bots, scoring, lobby fan-out all on it); a
table of bots is played to its end over HTTP and scoring has its result."""

from __future__ import annotations

import asyncio
from pathlib import Path

from shared.bus import Keys, connect, delete_namespace
from tests.lobby.helpers import running_lobby


async def test_a_table_of_bots_is_played_and_scored_on_the_cluster(
    redis_cluster_url: str, keys: Keys, tmp_path: Path
) -> None:
    """On SQLite only: the SQL side is the same as on one Redis, and CI time is short."""
    database_url = f"sqlite:///{tmp_path / 'caravel.db'}"
    client = connect(redis_cluster_url)
    try:
        async with running_lobby(redis_cluster_url, keys, database_url, tmp_path) as http:
            bots = {"0": "random", "1": "greedy", "2": "random"}
            created = await http.post("/tables", json={"seats": 3, "bots": bots})
            assert created.status_code == 201, created.json()
            table = created.json()["id"]
            for _ in range(3000):
                if (await http.get(f"/tables/{table}")).json()["status"] == "finished":
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError("the game of bots never finished on the cluster")
            for _ in range(500):
                result = await http.get(f"/games/{table}/result")
                if result.status_code == 200:
                    break
                await asyncio.sleep(0.02)
            assert result.status_code == 200, result.json()
            assert sorted(r["seat"] for r in result.json()["results"]) == [0, 1, 2]
            view = (await http.get(f"/games/{table}/view")).json()
            assert view["phase"] == "over"
            log = await client.xrange(keys.log(table))
            assert [int(i.split(b"-")[0]) for i, _ in log] == list(range(1, len(log) + 1))
            assert view["version"] == len(log)
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()
