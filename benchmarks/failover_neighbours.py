"""Benchmark: how fast the healthy shards of a Redis Cluster answer while another shard's
master fails over (issue 25: "a shard's trouble stays on its shard").

    python -m benchmarks.failover_neighbours --rounds 2

A 3+3 cluster of its own (``tests/cluster.py``, ``min-replicas-to-write 1``); one client
(``shared.bus.connect``, the services' ``ShardedCluster``) runs 10 tasks writing keys of the
healthy shards (a SET, 20 ms apart) and 20 writing keys of one master's shard, each backing
off 0.2 s after a failure as a service's loop does. The master is killed (SIGKILL) and its
replica takes over. Printed per round: the healthy shards' SETs per second in the 2 s before
the kill, in the 4 s after it (and their ratio), and the slowest healthy SET in the 6 s
after. Run it against another checkout by its ``PYTHONPATH`` to compare. A benchmark, not a
test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from shared.bus import connect
from tests.cluster import LocalCluster, keys_by_port, redis_server

HEALTHY_TASKS = 10
AWAY_TASKS = 20


async def _writes(
    client: Any, key: str, stop: asyncio.Event, seen: list[tuple[float, float]]
) -> None:
    """SET ``key`` until ``stop``; each success's start and duration in ``seen``."""
    while not stop.is_set():
        started = time.monotonic()
        try:
            await client.set(key, "x")
        except Exception:
            await asyncio.sleep(0.2)  # a service's loop backs off after a failure
            continue
        seen.append((started, time.monotonic() - started))
        await asyncio.sleep(0.02)


async def one_round() -> dict[str, float]:
    server = redis_server()
    if server is None:
        raise SystemExit("needs redis-server 7 or later")
    cluster = LocalCluster(server, options=("--min-replicas-to-write", "1")).start()
    client: Any = connect(cluster.url)
    try:
        await client.ping()
        by_port = keys_by_port(client)
        victim = sorted(by_port)[0]
        healthy = [k for port, ks in by_port.items() if port != victim for k in ks[:5]]
        stop, seen, ignored = asyncio.Event(), [], []
        tasks = [_writes(client, k, stop, seen) for k in healthy[:HEALTHY_TASKS]]
        tasks += [_writes(client, k, stop, ignored) for k in by_port[victim][:AWAY_TASKS]]
        running = [asyncio.create_task(t) for t in tasks]
        await asyncio.sleep(3)
        killed = time.monotonic()
        cluster.kill(victim)
        await asyncio.sleep(8)
        stop.set()
        await asyncio.gather(*running)
        before = sum(killed - 2 <= t < killed for t, _ in seen) / 2
        after = sum(killed <= t < killed + 4 for t, _ in seen) / 4
        slowest = max((d for t, d in seen if killed <= t < killed + 6), default=0.0)
        return {
            "healthy_sets_per_s_before": before,
            "healthy_sets_per_s_4s_after": after,
            "ratio": round(after / before, 2) if before else 0.0,
            "slowest_s": round(slowest, 3),
        }
    finally:
        await client.aclose()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.rounds):
        print(json.dumps(asyncio.run(one_round())))


if __name__ == "__main__":
    main()
