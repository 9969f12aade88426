"""The bot player's fixed and per-request Redis work, in CPU of this process.

    python benchmarks/ai_deadlines.py [--redis-url redis://127.0.0.1:6379/8] [--rounds 500]

- ``fire_deadlines``: one round of the deadlines loop (every partition's head read; the
  loop runs about ten rounds a second, busy or idle), 64 partitions with no deadline due.
  Run it from another checkout (``PYTHONPATH=/tmp/base``) for that checkout's figure.
- a human's clock with its request's acknowledgement: ``shared.bus.deadlines.set_and_ack``
  (one round trip) against the ZADD pipeline then XACK it replaced (two), alternated.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from services.ai.service import BotPlayer
from shared.bus import Keys, connect, delete_namespace, ensure_group
from shared.settings import Settings


async def run(url: str, rounds: int, requests: int) -> None:
    redis = connect(url)
    keys = Keys(f"cvaid-{uuid.uuid4().hex[:8]}", 64)
    try:
        player = BotPlayer(redis, keys, Settings(key_prefix=keys.prefix, partitions=64))
        for _ in range(50):
            await player.fire_deadlines()
        started = time.process_time()
        for _ in range(rounds):
            await player.fire_deadlines()
        per_round = 1e6 * (time.process_time() - started) / rounds
        print(f"fire_deadlines: {per_round:.0f} µs of CPU per round")
        try:
            from shared.bus.deadlines import set_and_ack
        except ImportError:
            return  # a checkout without it: the round alone
        stream, deadlines = keys.decisions(3), keys.deadlines(3)
        await ensure_group(redis, stream, "ai")

        async def two_trips(i: int, entry: bytes) -> None:
            async with redis.pipeline(transaction=False) as pipe:
                pipe.zadd(deadlines, {f'["g-{i}", {i}, 0]': 1e9 + i})
                await pipe.execute()
            await redis.xack(stream, "ai", entry)

        async def one_trip(i: int, entry: bytes) -> None:
            member = {f'["g-{i}", {i}, 0]': 1e9 + i}
            await set_and_ack(redis, "ai", [(deadlines, member, stream, [entry])])

        for _ in range(3):
            for name, step in (("ZADD pipeline, XACK", two_trips), ("set_and_ack", one_trip)):
                entries = [await redis.xadd(stream, {"r": "x"}) for _ in range(requests)]
                await redis.xreadgroup("ai", "c", {stream: ">"}, count=requests)
                started = time.process_time()
                for i, entry in enumerate(entries):
                    await step(i, entry)
                cpu = 1e6 * (time.process_time() - started) / requests
                print(f"{name}: {cpu:.1f} µs of CPU per request")
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/8")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.redis_url, args.rounds, args.requests))


if __name__ == "__main__":
    main()
