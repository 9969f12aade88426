"""One shard of a Redis Cluster refusing writes (NOREPLICAS: its replica is away and it is
told to keep ``min-replicas-to-write``) must not stop the games of the other shards: every
loop that walks all partitions keeps its faults to the partitions they hit."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from shared.bus import CommandSender, Keys, connect, delete_namespace

from .helpers import create_game, running_engine

HELD_S = 4.0  # the fault lasts this long at least: several lease lifetimes (1 s in tests)
ANSWER_S = 30.0  # a command's answer, on a loaded machine


@asynccontextmanager
async def refusing_writes(client: Any, key: str) -> AsyncIterator[None]:
    """The master of ``key``'s slot refuses every write (NOREPLICAS) while in the block."""
    node = client.get_node_from_key(key)
    await client.execute_command("CONFIG SET", "min-replicas-to-write", "5", target_nodes=node)
    try:
        yield
    finally:
        await client.execute_command("CONFIG SET", "min-replicas-to-write", "0", target_nodes=node)


def _game_in(keys: Keys, p: int) -> str:
    return next(
        g for i in range(100_000) if keys.partition(g := f"g-{uuid.uuid4().hex[:6]}-{i}") == p
    )


async def test_a_shard_refusing_writes_stops_only_its_own_partitions(
    redis_cluster_url: str,
) -> None:
    keys = Keys(prefix=f"cvt-{uuid.uuid4().hex[:10]}", partitions=8)
    client: Any = connect(redis_cluster_url)
    sender = CommandSender(client, keys)
    try:
        await client.ping()  # the slots known
        victim = client.get_node_from_key(keys.commands(0)).name
        hit = [
            p
            for p in keys.all_partitions()
            if client.get_node_from_key(keys.commands(p)).name == victim
        ]
        healthy = [p for p in keys.all_partitions() if p not in hit]
        assert healthy, "every partition on one shard: nothing to compare"
        async with running_engine(client, keys):
            for p in keys.all_partitions():
                result = await sender.execute(create_game(_game_in(keys, p)), timeout_s=10)
                assert result.status == "accepted"
            async with refusing_writes(client, keys.commands(0)):
                started, rounds = time.monotonic(), 0
                while rounds < 2 or time.monotonic() - started < HELD_S:
                    for p in healthy:  # answered while the fault lasts (the time a loaded
                        # machine takes: before, none was, however long one waited)
                        game = create_game(_game_in(keys, p))
                        result = await sender.execute(game, timeout_s=ANSWER_S)
                        assert result.status == "accepted", (p, result)
                    rounds += 1
            for p in hit:  # the shard is back: its partitions are served again
                result = await sender.execute(create_game(_game_in(keys, p)), timeout_s=ANSWER_S)
                assert result.status == "accepted"
    finally:
        await delete_namespace(client, keys.prefix)
        await client.aclose()
