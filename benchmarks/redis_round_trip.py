"""Benchmark: one Redis round trip on the services' client (`shared.bus.connect` with a
waiting pool, as `services.runtime` makes it): ``--pings`` PINGs one after the other.

Count instructions, deterministic on a busy machine: under ``valgrind --tool=cachegrind
--cache-sim=no``, a run of ``--pings 2200`` minus one of ``--pings 200``, over 2,000.
Another checkout's: ``PYTHONPATH=/tmp/old python /tmp/old/benchmarks/redis_round_trip.py``
(copy this file there if it has none).

    python benchmarks/redis_round_trip.py --pings 2200 [--redis-url redis://127.0.0.1:6379/9]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from shared.bus import connect


async def pings(url: str, count: int) -> float:
    """CPU seconds of ``count`` PINGs."""
    client = connect(url, 5.0)
    try:
        await client.ping()
        started = time.process_time()
        for _ in range(count):
            await client.ping()
        return time.process_time() - started
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pings", type=int, default=2200)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()
    cpu = asyncio.run(pings(args.redis_url, args.pings))
    print(f"{args.pings} PINGs, {cpu / args.pings * 1e6:.1f} µs of CPU each")


if __name__ == "__main__":
    main()
