"""The bus consumers' CPU per batch between a read and the handler, without the read.

A :class:`~shared.bus.GroupConsumer` over 8 streams of a real Redis (its shared read set
up, then not used) is handed the same reply of ``--per`` entries ``--batches`` times, as
its read step hands on what XREADGROUP returned: FastStream's consume path (its logging
and Prometheus middlewares, parser, decoder, context), the streams' locks and a handler
that only counts. At one entry per batch, what every service's consumer pays per message
when the bus is quiet (the move benchmark's case); at 30, per entry at the engine's batch
size. On a busy machine count instructions instead (``valgrind --tool=cachegrind
--cache-sim=no``, ``--batches 2200`` minus ``--batches 200``, over 2,000)::

    python benchmarks/bus_dispatch.py --batches 4000 --per 1
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from shared.bus import BODY, Broker, Delivery, GroupConsumer, Keys, connect, delete_namespace
from shared.bus.faststream_ext import _hand_on

WARMUP = 200
STREAMS = 8


async def run(url: str, batches: int, per: int) -> float:
    """CPU seconds of ``batches`` dispatches of ``per`` entries each."""
    redis = connect(url)
    keys = Keys(f"cvdispatch-{uuid.uuid4().hex[:8]}", STREAMS)
    broker = Broker(redis, readers=STREAMS, service="bench")
    handled = 0

    async def handle(deliveries: list[Delivery]) -> None:
        nonlocal handled
        handled += len(deliveries)

    consumer = GroupConsumer(broker, redis, "bench", "c", keys, handle, batch=200)
    try:
        await broker.start()
        streams = [keys.commands(p) for p in range(STREAMS)]
        for stream in streams:
            await consumer.subscribe(stream)
        shared = consumer._shared
        body = b'{"command_id":"c1","game_id":"g-1","seat":1,"type":"place","payload":{}}'
        reply = [
            [streams[i % STREAMS].encode(), [(f"{i + 1}-0".encode(), {BODY: body})]]
            for i in range(per)
        ]
        sub = shared.stream_sub
        for _ in range(WARMUP):
            await _hand_on(shared, sub, reply, sub.streams)
        started = time.process_time()
        for _ in range(batches):
            await _hand_on(shared, sub, reply, sub.streams)
        cpu = time.process_time() - started
        assert handled == (WARMUP + batches) * per, "every entry reaches the handler"
        return cpu
    finally:
        await consumer.close()
        await broker.stop()
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--batches", type=int, default=4000)
    parser.add_argument("--per", type=int, default=1, help="Entries per batch.")
    args = parser.parse_args()
    cpu = asyncio.run(run(args.redis_url, args.batches, args.per))
    per_batch = 1e6 * cpu / args.batches
    per_entry = per_batch / args.per
    print(f"{args.per} per batch: {per_batch:.1f} µs per batch, {per_entry:.2f} per entry")


if __name__ == "__main__":
    main()
