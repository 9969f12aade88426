"""What a consumer group does outside FastStream's subscribers, and so outside its
middleware, is counted all the same: entries reclaimed and handed to the handler again, and
entries dead-lettered (``caravel_bus_reclaimed_total``, ``caravel_bus_dead_lettered_total``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from shared.bus import Broker, Delivery, GroupConsumer, Keys, ensure_group
from shared.bus.metrics import channel

from ..backbone.helpers import read_as, wait_for

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


async def test_a_consumed_batch_and_a_publication_are_counted_by_channel(
    redis: Redis, keys: Keys
) -> None:
    """FastStream's series, kept by the bus's own middleware (``BusMetrics``): a batch is
    counted by its entries and their size under its channel, handled without an error as
    ``acked``, a batch whose handler raises as ``error`` with the exception's type; nothing
    stays in process; a publication is counted under its destination's channel; a status
    never counted has no series."""
    stream = keys.commands(0)
    service = keys.prefix  # this test's own series
    broker = Broker(redis, readers=1, service=service)
    seen: list[bytes] = []

    async def handle(batch: list[Delivery]) -> None:
        seen.extend(d.fields[b"n"] for d in batch)
        if any(d.fields[b"n"] == b"boom" for d in batch):
            raise ValueError("a handler that fails")

    consumer = GroupConsumer(broker, redis, GROUP, "c", keys, handle)
    handler = {"app_name": service, "broker": "redis", "handler": channel(stream)}

    def value(name: str, **more: str) -> float | None:
        return REGISTRY.get_sample_value(f"caravel_bus_{name}", {**handler, **more})

    def handled(status: str) -> Callable[[], Awaitable[bool]]:
        async def counted() -> bool:
            return value("received_processed_messages_total", status=status) == 1

        return counted

    try:
        await broker.start()
        await consumer.subscribe(stream)
        await redis.xadd(stream, {"n": "1"})
        await wait_for(handled("acked"))
        await redis.xadd(stream, {"n": "boom"})
        await wait_for(handled("error"))
        await broker.publish(b"{}", stream=keys.commands(1))
    finally:
        await consumer.close()
        await broker.stop()
    assert seen == [b"1", b"boom"]
    assert value("received_messages_total") == 2
    assert value("received_messages_size_bytes_sum") == len(b"1") + len(b"boom")
    assert value("received_messages_in_process") == 0
    assert value("received_processed_messages_duration_seconds_count") == 2
    exceptions = value("received_processed_messages_exceptions_total", exception_type="ValueError")
    assert exceptions == 1
    published = {
        "app_name": service,
        "broker": "redis",
        "destination": channel(keys.commands(1)),
        "status": "success",
    }
    assert REGISTRY.get_sample_value("caravel_bus_published_messages_total", published) == 1
    # A status never counted has no series (FastStream's middleware made none either).
    assert value("received_processed_messages_total", status="nacked") is None
    failed = {**published, "status": "error"}
    assert REGISTRY.get_sample_value("caravel_bus_published_messages_total", failed) is None
