"""What a consumer group does outside FastStream's subscribers, and so outside its
middleware, is counted all the same: entries reclaimed and handed to the handler again, and
entries dead-lettered (``caravel_bus_reclaimed_total``, ``caravel_bus_dead_lettered_total``)."""

from __future__ import annotations

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from shared.bus import Broker, Delivery, GroupConsumer, Keys, ensure_group
from shared.bus.metrics import channel

from ..backbone.helpers import read_as

GROUP = "counted"


async def test_entries_reclaimed_from_a_dead_consumer_and_dead_lettered_are_counted(
    redis: Redis, keys: Keys
) -> None:
    stream = keys.commands(0)
    await ensure_group(redis, stream, GROUP)
    for n in range(3):
        await redis.xadd(stream, {"n": str(n)})
    await read_as(redis, GROUP, "dead", stream, 3)  # read, then the consumer died

    handled: list[bytes] = []

    async def handle(batch: list[Delivery]) -> None:
        """Acknowledges every entry but ``n=2``, which keeps failing."""
        handled.extend(d.fields[b"n"] for d in batch)
        await survivor.ack([d for d in batch if d.fields[b"n"] != b"2"])

    service = keys.prefix  # this test's own series
    survivor = GroupConsumer(
        Broker(redis, service=service), redis, GROUP, "alive", keys, handle, max_deliveries=2
    )
    labels = {"app_name": service, "channel": channel(stream), "group": GROUP}

    def count(name: str) -> float | None:
        return REGISTRY.get_sample_value(f"caravel_bus_{name}_total", labels)

    assert await survivor.reclaim(stream, 0) == 3
    assert handled == [b"0", b"1", b"2"]
    assert count("reclaimed") == 3
    assert count("dead_lettered") is None  # not a series yet: nothing dead-lettered

    # n=2 was delivered twice (read, reclaimed): a third delivery is one too many.
    assert await survivor.reclaim(stream, 0) == 0
    assert count("reclaimed") == 3
    assert count("dead_lettered") == 1
    assert await redis.xlen(keys.dead_letters(0)) == 1
