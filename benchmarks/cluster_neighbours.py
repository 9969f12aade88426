"""Benchmark: what a master's kill does to the commands of the other masters, through
Caravel's cluster client (``shared.bus.connect``), durability on (``min-replicas-to-write
1``, a ``WAIT`` in each write's round trip).

    python -m benchmarks.cluster_neighbours [--before 3] [--after 9] [--subscribers 40]

On a cluster of its own (3 masters, 3 replicas, ``tests/cluster.py``), tasks run without
pause: per master, four ``SET`` + ``WAIT 1`` pipelines and four ``XADD`` + ``XREADGROUP
BLOCK`` + ``XACK`` loops on keys of that master; and two pipelines that span every master
(one ``SET`` per master); with ``--subscribers N``, N more per master that block on idle
streams and back off after a failure as the services' subscribers do (0.1 s doubling to
0.5 s): a service process holds dozens, a third of them on the killed master. A master is
killed (SIGKILL) ``--before`` s in; prints each kind's completed operations per half
second, master by master, and the slowest operations of the healthy masters after the kill.
A benchmark, not a test (issue 25: are the healthy shards' commands held by the client while
a master fails over?).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from shared.bus import connect
from shared.bus.faststream_ext import READ_RETRY_FIRST_S, READ_RETRY_S
from tests.cluster import LocalCluster, keys_by_port, redis_server

Done = list[tuple[float, str, int, float, bool]]  # start, kind, port (0: all), seconds, ok


async def _set_wait(client: Any, port: int, key: str, t0: float, done: Done, stop: Any) -> None:
    node = client.get_node_from_key(key)
    while not stop.is_set():
        start, ok = time.monotonic(), True
        try:
            async with client.pipeline(transaction=False) as pipe:
                pipe.set(key, "x")
                pipe.execute_command("WAIT", 1, 1000, target_nodes=node)
                await pipe.execute()
        except Exception:
            ok = False
            await asyncio.sleep(0.1)
        done.append((start - t0, "set+wait", port, time.monotonic() - start, ok))


async def _stream(client: Any, port: int, key: str, t0: float, done: Done, stop: Any) -> None:
    stream = f"{{{key}}}s"  # the slot of key: its master
    await client.xgroup_create(stream, "g", id="0", mkstream=True)
    while not stop.is_set():
        start, ok = time.monotonic(), True
        try:
            await client.xadd(stream, {"a": "1"})
            got = await client.xreadgroup("g", "c", {stream: ">"}, count=10, block=500)
            ok = bool(got)
            if got:
                await client.xack(stream, "g", *[i for i, _ in got[0][1]])
        except Exception:
            ok = False
            await asyncio.sleep(0.1)
        done.append((start - t0, "stream", port, time.monotonic() - start, ok))


async def _spanning(client: Any, keys: list[str], t0: float, done: Done, stop: Any) -> None:
    """The last key is the victim's: the others' replies are the healthy masters'."""
    while not stop.is_set():
        start = time.monotonic()
        async with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(key, "y")
            replies = await pipe.execute(raise_on_error=False)
        ok = not any(isinstance(r, Exception) for r in replies[:-1])
        done.append((start - t0, "spanning", 0, time.monotonic() - start, ok))
        if isinstance(replies[-1], Exception):
            await asyncio.sleep(0.05)


async def _idle(client: Any, key: str, stop: Any) -> None:
    """A subscriber of an idle stream: blocking reads, backing off after a failure."""
    stream, delay = f"{{{key}}}idle", READ_RETRY_FIRST_S
    await client.xgroup_create(stream, "g", id="0", mkstream=True)
    while not stop.is_set():
        try:
            await client.xreadgroup("g", "c", {stream: ">"}, count=10, block=1000)
            delay = READ_RETRY_FIRST_S
        except Exception:
            await asyncio.sleep(delay)
            delay = min(delay * 2, READ_RETRY_S)


async def main(before_s: float, after_s: float, subscribers: int = 0) -> None:
    server = redis_server()
    if server is None:
        raise SystemExit("needs redis-server 7 or later")
    cluster = LocalCluster(server=server, options=("--min-replicas-to-write", "1")).start()
    try:
        client: Any = connect(cluster.url)
        await client.ping()
        by_port = keys_by_port(client, 300 + 3 * subscribers)
        masters = cluster.master_ports()
        victim = masters[0]
        done: Done = []
        stop = asyncio.Event()
        t0 = time.monotonic()
        spanning = [by_port[p][50] for p in masters if p != victim] + [by_port[victim][50]]
        tasks = [asyncio.create_task(_spanning(client, spanning, t0, done, stop)) for _ in "ab"]
        for port in masters:
            for i in range(4):
                for loop, key in ((_set_wait, by_port[port][i]), (_stream, by_port[port][10 + i])):
                    tasks.append(asyncio.create_task(loop(client, port, key, t0, done, stop)))
        for port in masters:
            for key in by_port[port][60 : 60 + subscribers]:
                tasks.append(asyncio.create_task(_idle(client, key, stop)))
        await asyncio.sleep(before_s)
        kill_at = time.monotonic() - t0
        cluster.kill(victim)
        await asyncio.sleep(after_s)
        stop.set()
        await asyncio.gather(*tasks)
        await client.aclose()
    finally:
        cluster.stop()
    _print(done, masters, victim, kill_at, before_s + after_s)


def _print(done: Done, masters: list[int], victim: int, kill_at: float, end_s: float) -> None:
    print(f"killed at {kill_at:.2f} s: master {victim}; operations done per 0.5 s from 1 s on")
    bins = int((end_s - 1) / 0.5)
    for kind in ("set+wait", "stream", "spanning"):
        for port in [0] if kind == "spanning" else masters:
            row = [0] * bins
            for t, k, p, _, ok in done:
                b = int((t - 1) / 0.5)
                if (k, p) == (kind, port) and ok and 0 <= b < bins:
                    row[b] += 1
            name = "killed" if port == victim else ("all" if port == 0 else "healthy")
            print(f"{kind:9} {port:6} {name:8} {row}")
        slow = sorted(
            (round(s, 3), round(t, 2))
            for t, k, p, s, ok in done
            if k == kind and p != victim and ok and t > kill_at
        )[-3:]
        print(f"{kind}: slowest on healthy masters after the kill (s, started at s): {slow}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=float, default=3.0)
    parser.add_argument("--after", type=float, default=9.0)
    parser.add_argument("--subscribers", type=int, default=0, help="idle readers per master")
    args = parser.parse_args()
    asyncio.run(main(args.before, args.after, args.subscribers))
