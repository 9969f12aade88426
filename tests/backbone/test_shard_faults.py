"""One shard of a Redis Cluster refusing writes (NOREPLICAS: its replica is away and it is
told to keep ``min-replicas-to-write``) must not stop the games of the other shards: every
loop that walks all partitions keeps its faults to the partitions they hit."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.exceptions import ResponseError

from shared.bus import Broker, CommandSender, Delivery, GroupConsumer, Keys, connect
from shared.bus.consumer import ensure_group
from shared.bus.keys import delete_namespace

from .helpers import create_game, read_as, running_engine

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


async def test_reclaiming_goes_on_past_a_shard_that_refuses_writes(
    redis_cluster_url: str,
) -> None:
    """A consumer group's reclaiming (the views', the bots') walks every partition's stream:
    one whose shard refuses writes (XAUTOCLAIM is one) is skipped and reported, and the
    idle entries of the others are taken over all the same (before, the first failing
    stream ended the round for every stream after it)."""
    keys = Keys(prefix=f"cvt-{uuid.uuid4().hex[:10]}", partitions=8)
    client: Any = connect(redis_cluster_url)
    handled: list[str] = []

    async def handle(deliveries: list[Delivery]) -> None:
        handled.extend(d.stream for d in deliveries)
        await consumer.ack(deliveries)

    broker = Broker(client, readers=keys.partitions)
    consumer = GroupConsumer(broker, client, "readers", "live", keys, handle, claim_idle_ms=10)
    try:
        await client.ping()
        streams = [keys.commands(p) for p in keys.all_partitions()]
        for stream in streams:  # one entry each, read by a consumer that then died
            await ensure_group(client, stream, "readers")
            await client.xadd(stream, {"v": "1"})
            await read_as(client, "readers", "dead", stream, 10)
        await broker.start()
        for stream in streams:
            await consumer.subscribe(stream)
        victim = client.get_node_from_key(streams[0]).name
        hit = {s for s in streams if client.get_node_from_key(s).name == victim}
        await asyncio.sleep(0.05)  # idle longer than claim_idle_ms
        async with refusing_writes(client, streams[0]):
            with pytest.raises(ResponseError, match="NOREPLICAS"):
                await consumer.reclaim_idle()  # the first failure, once all had their turn
        assert sorted(handled) == sorted(set(streams) - hit)
    finally:
        await consumer.close()
        await broker.stop()
        await delete_namespace(client, keys.prefix)
        await client.aclose()
