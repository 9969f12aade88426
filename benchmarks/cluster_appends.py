"""Benchmark: event-store appends on one Redis and on a Redis Cluster, and what waiting for a
replica (``CARAVEL_DURABILITY_REPLICAS=1``, a ``WAIT`` per master in the append's round
trip) costs; and, with ``--failover``, how long a killed master's partitions refuse appends.

    python -m benchmarks.cluster_appends --single-url redis://127.0.0.1:6379/9 --seconds 8
    python -m benchmarks.cluster_appends --failover

Appends go in batches of ``--batch`` (one per game, the games spread over 64 partitions,
one small event each), one batch after another, as the engine writes a batch: the figures
are appends per second and the time per batch. Configurations alternate, ``--rounds``
times. The cluster is 3 masters and 3 replicas started from the machine's ``redis-server``
7 (``tests/cluster.py``) unless ``--cluster-url`` names one. Each run works in a key
namespace of its own, deleted afterwards. ``--failover`` kills a master (SIGKILL) of a
cluster of its own under appends with durability on and reports the time until every
partition takes appends again. Prints one JSON object. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import time
import uuid
from typing import Any

from redis.asyncio import Redis

from shared.bus import Keys, connect, delete_namespace
from shared.eventstore import Append, EventStore
from tests.cluster import LocalCluster, failover_drill, redis_server

EVENT = ('{"type":"bench","data":{"n":1}}', "")


async def _appends(url: str, replicas: int, batch: int, seconds: float) -> dict[str, Any]:
    keys = Keys(prefix=f"cvb-{uuid.uuid4().hex[:8]}", partitions=64)
    redis: Redis = connect(url)
    store = EventStore(redis, keys, replicas=replicas, replica_timeout_ms=1000)
    games = [f"g{i}" for i in range(batch)]
    versions = dict.fromkeys(games, 0)
    times: list[float] = []
    unanswered = 0
    try:
        give_up = time.monotonic() + seconds
        while time.monotonic() < give_up:
            appends = [Append(g, versions[g], [EVENT], uuid.uuid4().hex) for g in games]
            started = time.perf_counter()
            results = await store.append_many(appends)
            times.append(time.perf_counter() - started)
            for g, r in zip(games, results, strict=True):
                versions[g] = r.version
                unanswered += not r.answered
    finally:
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
    return {
        "appends_per_second": round(batch * len(times) / sum(times)),
        "batch_ms_p50": round(statistics.median(times) * 1000, 2),
        "batch_ms_p99": round(sorted(times)[int(len(times) * 0.99)] * 1000, 2),
        "unanswered": unanswered,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--single-url", default=None, help="one Redis to compare with")
    parser.add_argument("--cluster-url", default=None, help="a cluster (else one is started)")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--failover", action="store_true")
    args = parser.parse_args()
    server = redis_server()
    started = None
    if args.failover or not args.cluster_url:
        assert server is not None, "no redis-server 7 to start a cluster from"
        started = LocalCluster(server).start()
    try:
        if args.failover:
            assert started is not None
            keys = Keys(prefix=f"cvb-{uuid.uuid4().hex[:8]}", partitions=64)
            drill = await failover_drill(started, keys)
            print(json.dumps(dataclasses.asdict(drill)))
            return
        url = args.cluster_url or (started.url if started else "")
        runs = [("cluster", url, 0), ("cluster", url, 1)]
        if args.single_url:
            runs.insert(0, ("single", args.single_url, 0))
        out: dict[str, list[dict[str, Any]]] = {}
        for _ in range(args.rounds):
            for name, target, replicas in runs:
                figures = await _appends(target, replicas, args.batch, args.seconds)
                out.setdefault(f"{name} durability={replicas}", []).append(figures)
        print(json.dumps({"batch": args.batch, "seconds": args.seconds, "runs": out}))
    finally:
        if started is not None:
            started.stop()


if __name__ == "__main__":
    asyncio.run(main())
