"""Benchmark: how soon an engine answers commands again after its Redis comes back.

    python benchmarks/redis_outage.py --runs 5 --down-s 3 [--redis-server /usr/bin/redis-server]

Starts a private ``redis-server`` (no persistence) on a free port and an engine in process
with the default client and settings, and checks that a ``create_game`` is answered. Then,
``--runs`` times: stops the server (SIGTERM), waits ``--down-s``, starts it again on the
same port (empty: it lost the streams, groups and leases, the worst case), and measures from
the moment the new server answers PING until a new ``create_game``, sent then by a fresh
client, is answered. Prints one JSON object. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import tempfile
import time

from redis.asyncio import Redis

from services.engine import Engine
from shared.bus import CommandSender, Keys, connect
from shared.contracts import CommandEnvelope
from shared.observability import configure_logging
from shared.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(binary: str, port: int, folder: str) -> subprocess.Popen[bytes]:
    command = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", folder]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


async def _until_up(url: str) -> float:
    """When the server answers PING (polled every 2 ms, each time on a new connection)."""
    while True:
        client: Redis = connect(url, retry=None)
        try:
            await client.ping()
            return time.perf_counter()
        except Exception:
            await asyncio.sleep(0.002)
        finally:
            await client.aclose()


def _create(game_id: str) -> CommandEnvelope:
    payload = {"ruleset": "standard", "players": 2, "seed": 1}
    return CommandEnvelope(game_id=game_id, type="create_game", actor="system", payload=payload)


async def measure(binary: str, runs: int, down_s: float) -> dict[str, object]:
    port, folder = _free_port(), tempfile.mkdtemp(prefix="caravel-outage-")
    url = f"redis://127.0.0.1:{port}/0"
    server = _start(binary, port, folder)
    await _until_up(url)
    keys = Keys()
    engine_redis = connect(url)
    stop = asyncio.Event()
    running = asyncio.create_task(Engine(engine_redis, Settings(), keys).run(stop))
    recoveries: list[float] = []
    try:
        sender_redis = connect(url)
        await CommandSender(sender_redis, keys).execute(_create("warm-up"), timeout_s=30)
        await sender_redis.aclose()
        for run in range(runs):
            server.terminate()
            server.wait()
            await asyncio.sleep(down_s)
            server = _start(binary, port, folder)
            up = await _until_up(url)
            sender_redis = connect(url)
            result = await CommandSender(sender_redis, keys).execute(
                _create(f"after-{run}"), timeout_s=30
            )
            recoveries.append(time.perf_counter() - up)
            await sender_redis.aclose()
            assert result.status == "accepted", result
    finally:
        stop.set()
        await asyncio.gather(running, return_exceptions=True)
        await engine_redis.aclose()
        server.terminate()
        server.wait()
    return {
        "runs": runs,
        "down_s": down_s,
        "recovery_s": [round(r, 3) for r in recoveries],
        "median_s": round(statistics.median(recoveries), 3),
        "max_s": round(max(recoveries), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--down-s", type=float, default=3.0)
    parser.add_argument("--redis-server", default="/usr/bin/redis-server")
    options = parser.parse_args()
    configure_logging(Settings().log_level)  # as the services log: JSON lines on stderr
    print(json.dumps(asyncio.run(measure(options.redis_server, options.runs, options.down_s))))


if __name__ == "__main__":
    main()
