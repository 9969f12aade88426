"""``CARAVEL_REDIS_URL`` naming a Redis Cluster: the client the services get from it."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio.cluster import RedisCluster

from shared.bus import connect
from shared.bus.connection import CLUSTER_SOCKET_TIMEOUT_S, HiredisConnection


async def test_a_cluster_url_gives_a_cluster_client_of_its_nodes_packing_with_hiredis() -> None:
    client: Any = connect("redis+cluster://u%40x:p%3Aw@node-a:7000,node-b:7001")
    assert isinstance(client, RedisCluster)
    assert [(n.host, n.port) for n in client.startup_nodes] == [("node-a", 7000), ("node-b", 7001)]
    assert all(n.connection_class is HiredisConnection for n in client.startup_nodes)
    kwargs = client.connection_kwargs
    assert kwargs["connection_class"] is HiredisConnection  # nodes found later too
    assert kwargs["socket_timeout"] == CLUSTER_SOCKET_TIMEOUT_S > 10  # above the longest wait
    assert (kwargs["username"], kwargs["password"]) == ("u@x", "p:w")
    await client.aclose()


@pytest.mark.parametrize(
    "url",
    ["redis+cluster://node-a:7000/2", "redis+cluster://node-a", "redis+cluster://a:1,:2"],
)
def test_a_cluster_url_names_host_port_nodes_only(url: str) -> None:
    with pytest.raises(ValueError, match="cluster"):
        connect(url)


async def test_the_cluster_answers_for_keys_of_every_slot(redis_cluster_url: str) -> None:
    client = connect(redis_cluster_url)
    try:
        key = "cvt-connection:{%d}:probe"
        for p in range(64):
            await client.set(key % p, p, ex=60)
        assert [int(await client.get(key % p) or -1) for p in range(64)] == list(range(64))
        await client.delete(*[key % p for p in range(64)])
    finally:
        await client.aclose()
