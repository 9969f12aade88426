"""Benchmark: how soon commands are answered again after an engine is killed with SIGKILL.

    python benchmarks/engine_kill.py --redis-url redis://127.0.0.1:6379/9 --runs 3

Starts two ``caravel engine`` processes with the default settings (lease TTL 5 s) in a key
namespace of their own, waits until both hold partitions, then, ``--runs`` times: kills one
engine with SIGKILL, at once sends a ``create_game`` to a new game in every partition, and
measures how long until every one is answered (the survivor must take over the dead
engine's leases first), then starts a fresh engine in its place. Prints one JSON object.
The namespace is deleted afterwards. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid

from shared.bus import CommandSender, Keys, connect, delete_namespace
from shared.contracts import CommandEnvelope


def _engine(url: str, keys: Keys) -> subprocess.Popen[bytes]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARAVEL_")},
        "CARAVEL_REDIS_URL": url,
        "CARAVEL_KEY_PREFIX": keys.prefix,
        "CARAVEL_PARTITIONS": str(keys.partitions),
        "CARAVEL_METRICS_PORT": "0",
        "CARAVEL_LOG_LEVEL": "WARNING",
    }
    command = [sys.executable, "-m", "services.cli", "engine"]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _one_game_per_partition(keys: Keys, run: int) -> list[str]:
    found: dict[int, str] = {}
    n = 0
    while len(found) < keys.partitions:
        game_id = f"kill-{run}-{n}"
        found.setdefault(keys.partition(game_id), game_id)
        n += 1
    return list(found.values())


async def _answered(sender: CommandSender, game_id: str) -> float:
    payload = {"ruleset": "standard", "players": 2, "seed": 1}
    command = CommandEnvelope(game_id=game_id, type="create_game", actor="system", payload=payload)
    result = await sender.execute(command, timeout_s=60)
    assert result.status == "accepted", result
    return time.perf_counter()


async def main_async(url: str, runs: int, partitions: int) -> dict[str, object]:
    keys = Keys(prefix=f"cvkill-{uuid.uuid4().hex[:8]}", partitions=partitions)
    redis = connect(url)
    sender = CommandSender(redis, keys)
    engines = [_engine(url, keys), _engine(url, keys)]
    recoveries: list[float] = []
    try:
        await asyncio.gather(*(_answered(sender, g) for g in _one_game_per_partition(keys, -1)))
        await asyncio.sleep(6)  # both engines hold a share (leases rebalance every TTL/3)
        for run in range(runs):
            victim = engines.pop(0)
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed = time.perf_counter()
            games = _one_game_per_partition(keys, run)
            done = await asyncio.gather(*(_answered(sender, g) for g in games))
            recoveries.append(max(done) - killed)
            engines.append(_engine(url, keys))
            await asyncio.sleep(6)
    finally:
        for process in engines:
            process.terminate()
            process.wait()
        await delete_namespace(redis, keys.prefix)
        await redis.aclose()
    return {
        "runs": runs,
        "partitions": partitions,
        "all_partitions_answered_s": [round(r, 2) for r in recoveries],
        "median_s": round(statistics.median(recoveries), 2),
        "max_s": round(max(recoveries), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=64)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args.redis_url, args.runs, args.partitions))))


if __name__ == "__main__":
    main()
