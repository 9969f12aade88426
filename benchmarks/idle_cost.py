"""What the services run apart cost with no moves: each process' CPU per second while idle
(one started table, no client), then, over TCP, the Redis commands each process sends per
second (attributed by MONITOR to the process that holds the connection; ``lua``: the calls
scripts make).

    PYTHONPATH=$PWD python benchmarks/idle_cost.py --tree /tmp/base-087a --tree $PWD \\
        --pairs 2 --seconds 20 --monitor 10 --redis-port 6431

Trees alternate (base, new, base, new, ...); each run prints one JSON line. A run's CPU is
read on a unix socket (as ``run.py --apart --apart-redis unix`` serves), its commands on a
TCP port of its own (MONITOR names a client by its address).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import caravel_loop  # beside run.py, as run.py imports it

LINE = re.compile(r'[\d.]+ \[\d+ ([^\]]+)\] "(\w+)"')


def idle_cpu(tree: str, settle_s: float, seconds: float) -> dict[str, float]:
    """Each process' CPU (ms per second) over ``seconds`` of idle, after ``settle_s``."""
    with caravel_loop.caravel_apart(sys.executable, tree, unix=True) as (_, apart):
        time.sleep(settle_s)
        procs = {n: psutil.Process(p) for n, p in apart.processes.items()}
        procs["redis"] = psutil.Process(apart.redis_pid)
        before = {n: sum(p.cpu_times()[:2]) for n, p in procs.items()}
        started = time.monotonic()
        time.sleep(seconds)
        after = {n: sum(p.cpu_times()[:2]) for n, p in procs.items()}
        dt = time.monotonic() - started
    return {n: round(1000 * (after[n] - before[n]) / dt, 1) for n in procs}


def commands(tree: str, settle_s: float, seconds: float, port: int) -> dict[str, float]:
    """Redis commands per second by ``process command`` while idle (MONITOR)."""
    with caravel_loop.caravel_apart(sys.executable, tree, redis_port=port) as (_, apart):
        time.sleep(settle_s)
        owners: dict[int, str] = {}
        for name, pid in apart.processes.items():
            for c in psutil.Process(pid).net_connections(kind="tcp"):
                if c.raddr and c.raddr.port == port:
                    owners[c.laddr.port] = name
        mon = subprocess.Popen(
            ["redis-cli", "-p", str(port), "monitor"], stdout=subprocess.PIPE, text=True
        )
        lines: list[str] = []
        assert mon.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(mon.stdout or []), daemon=True)
        reader.start()
        started = time.monotonic()
        time.sleep(seconds)
        mon.kill()
        dt = time.monotonic() - started
    counts: collections.Counter[str] = collections.Counter()
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        addr, cmd = m.group(1), m.group(2).lower()
        who = "lua" if addr == "lua" else owners.get(int(addr.rsplit(":", 1)[1]), "?")
        counts[f"{who} {cmd}"] += 1
    return {k: round(n / dt, 1) for k, n in counts.most_common()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="checkouts, alternated")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=20.0, help="idle CPU window")
    parser.add_argument("--monitor", type=float, default=0.0, help="MONITOR window (0: none)")
    parser.add_argument("--redis-port", type=int, default=6431)
    args = parser.parse_args()
    for i in range(args.pairs):
        for tree in args.tree:
            load = os.getloadavg()[0]
            out: dict[str, Any] = {"tree": tree, "pair": i, "load1": load}
            out["cpu_ms_per_s"] = cpu = idle_cpu(tree, args.settle, args.seconds)
            out["cpu_sum"] = round(sum(cpu.values()), 1)
            if args.monitor:
                cmds = commands(tree, args.settle, args.monitor, args.redis_port)
                out["commands_per_s"] = dict(list(cmds.items())[:60])
                out["commands_sum"] = round(sum(cmds.values()), 1)
            out["load1_after"] = os.getloadavg()[0]
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
