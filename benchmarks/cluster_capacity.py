"""Benchmark: what one command costs Redis and what it costs the engine, on one Redis and on a
Redis Cluster, and the throughput per master those costs project.

    python -m benchmarks.cluster_capacity --seconds 8 --rounds 2 [--rate 1000] [--games 64]

The load is `caravel bench pipeline`'s (``services.bench.pipeline``: games of random legal
commands, every command waited for), with one engine process, as fast as answers come
(``--rate``: that many commands/s offered, for the latency of one Redis and of the cluster
at the same load). Every 0.5 s it reads each master's CPU time (``INFO cpu``, user + sys)
and FCALL count (``INFO commandstats``) and the engine process's CPU time (``/proc``); the
costs are taken over the measured window (after the warm-up and the engine's start). Per
command: Redis CPU (all masters together, idle readers' blocking reads included) and engine
CPU. Projection per master: the commands per second one master could take at 100 % of a
core (1 / its CPU per command), and the engine cores those commands need; a cluster of N
masters takes N times that as long as engines are added (they share the partitions by
lease).

Both Redis setups are started here from the machine's ``redis-server`` 7 (one server; a
cluster of 3 masters and 3 replicas, ``tests/cluster.py``), so no other client's work is
counted; they alternate ``--rounds`` times. Prints one JSON object. A benchmark, not a test:
on a shared 2-core machine the load generator, the engine and Redis compete for the cores, so
the throughput measured is far below the projection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from services.bench import pipeline
from shared.bus import connect
from tests.cluster import LocalCluster, _free_ports, redis_server


async def _masters(client: Any) -> list[dict[str, float]]:
    """Each master's CPU seconds and FCALL calls so far."""
    if isinstance(client, RedisCluster):
        nodes = client.get_primaries()
        cpu = await client.info("cpu", target_nodes=nodes)
        stats = await client.info("commandstats", target_nodes=nodes)
        pairs = [(cpu[n.name], stats[n.name]) for n in nodes]
    else:
        pairs = [(await client.info("cpu"), await client.info("commandstats"))]
    return [
        {
            "cpu_s": c["used_cpu_user"] + c["used_cpu_sys"],
            "fcalls": s.get("cmdstat_fcall", {}).get("calls", 0),
        }
        for c, s in pairs
    ]


def _engines_cpu_s() -> float:
    """CPU seconds of this process's children so far (the engine ``pipeline`` spawns)."""
    pid = os.getpid()
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0.0
    for child in children:
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def _sample(client: Any, until: asyncio.Event, out: list[dict[str, Any]]) -> None:
    """Every 0.5 s: the time, each master's CPU and FCALLs, the engine's CPU."""
    while not until.is_set():
        out.append({"t": time.perf_counter(), "masters": await _masters(client)})
        out[-1]["engine_cpu_s"] = _engines_cpu_s()
        await asyncio.sleep(0.5)


async def _run(
    url: str, seconds: float, games: int, rate: float, warmup: float = 2.0
) -> dict[str, Any]:
    """One run; the costs are taken over the measured window (after the warm-up, which
    also holds the engine's start), the commands in it from the run's measured rate."""
    client = connect(url, max_connections=games + 64)
    samples: list[dict[str, Any]] = []
    done = asyncio.Event()
    try:
        sampler = asyncio.create_task(_sample(client, done, samples))
        started = time.perf_counter()
        figures = await pipeline(client, url, games, 3, seconds, 1, 64, 1, rate=rate, warmup=warmup)
        done.set()
        await sampler
    finally:
        await client.aclose()
    window = [s for s in samples if s["t"] >= started + warmup + 1.0]
    first, last = window[0], window[-2]  # the last one may be after the engine stopped
    span = last["t"] - first["t"]
    commands = figures["commands_per_second"] * span
    pairs = list(zip(last["masters"], first["masters"], strict=True))
    redis_cpu = [a["cpu_s"] - b["cpu_s"] for a, b in pairs]
    engine_cpu = last["engine_cpu_s"] - first["engine_cpu_s"]
    per_master_us = [1e6 * cpu / commands * len(redis_cpu) for cpu in redis_cpu]
    return {
        "window_seconds": round(span, 2),
        "commands_per_second": figures["commands_per_second"],
        "latency_p50_ms": figures["latency_ms"]["p50"],
        "latency_p99_ms": figures["latency_ms"]["p99"],
        "redis_cpu_us_per_command": round(1e6 * sum(redis_cpu) / commands, 1),
        "redis_cpu_share_by_master": [round(c / max(sum(redis_cpu), 1e-9), 2) for c in redis_cpu],
        "fcalls_by_master": [a["fcalls"] - b["fcalls"] for a, b in pairs],
        "engine_cpu_us_per_command": round(1e6 * engine_cpu / commands, 1),
        # One master at 100 % of a core, if the load spreads evenly over the masters.
        "projected_commands_per_second_per_master": round(1e6 / statistics.mean(per_master_us)),
    }


def _single(server: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_ports(1)[0]
    folder = tempfile.mkdtemp(prefix="caravel-bench-redis-")
    args = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder]
    process = subprocess.Popen([*args, "--appendonly", "no"], stdout=subprocess.DEVNULL)
    return process, f"redis://127.0.0.1:{port}/0"


async def _ready(url: str) -> None:
    for _ in range(100):
        try:
            client: Redis = connect(url)
            await client.ping()
            await client.aclose()
            return
        except Exception:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"no Redis at {url}")


async def main(seconds: float, rounds: int, games: int, rate: float) -> dict[str, Any]:
    server = redis_server()
    if server is None:
        raise SystemExit("needs redis-server 7 (Debian's /usr/bin/redis-server)")
    single, single_url = _single(server)
    cluster = LocalCluster(server).start()
    runs: dict[str, list[dict[str, Any]]] = {"single": [], "cluster": []}
    try:
        await _ready(single_url)
        for _ in range(rounds):
            runs["single"].append(await _run(single_url, seconds, games, rate))
            runs["cluster"].append(await _run(cluster.url, seconds, games, rate))
    finally:
        single.terminate()
        single.wait()
        cluster.stop()
    out: dict[str, Any] = {"seconds": seconds, "games": games, "rate": rate, "runs": runs}
    for kind, found in runs.items():
        for figure in (
            "commands_per_second",
            "latency_p50_ms",
            "latency_p99_ms",
            "redis_cpu_us_per_command",
            "engine_cpu_us_per_command",
            "projected_commands_per_second_per_master",
        ):
            out.setdefault("median", {}).setdefault(kind, {})[figure] = statistics.median(
                r[figure] for r in found
            )
    engine_us = out["median"]["cluster"]["engine_cpu_us_per_command"]
    per_master = out["median"]["cluster"]["projected_commands_per_second_per_master"]
    out["engine_cores_per_master_at_that_rate"] = round(per_master * engine_us / 1e6, 1)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--games", type=int, default=64)
    parser.add_argument("--rate", type=float, default=0, help="commands/s offered (0: open loop)")
    options = parser.parse_args()
    started = time.perf_counter()
    result = asyncio.run(main(options.seconds, options.rounds, options.games, options.rate))
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result, indent=2))
