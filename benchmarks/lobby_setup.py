"""Benchmark: the CPU a table's setup costs the server (issue 24: the table lifecycle).

    python benchmarks/lobby_setup.py --tables 20 --seconds 10 --rounds 3 [--processes 2]
        [--old TREE] [--old-processes 2] [--json]

Each round starts ``caravel up`` of this checkout (and, with ``--old TREE``, of another one
right after it: ``git -C . archive REV | tar -x -C TREE``, so both meet the same load on a
shared machine) and sets tables up closed loop, ``--tables`` at a time, for ``--seconds``
after a warm-up: what the peers benchmark does between two games (``POST /tables`` of two
seats, two ``POST /tables/{id}/join``, ``POST /tables/{id}/start``, which answers once the
game's first view is written). The games are not played.

It prints, per table set up and per request (four a table), the CPU (user + system, from
/proc) of the lobby process (``caravel up`` itself), of the other Python processes (its
children: engine, bots, scoring, views) and of the embedded Redis; the last line is the
medians, and with ``--old`` the ratios of this checkout's to the other's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

import httpx

from services.capacity import Plan, server, start_table, wait_ready
from services.usage import cpu_s, embedded_redis, tree_pids

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUESTS_PER_TABLE = 4  # create, two joins, start
WARMUP_S = 2.0


async def _setups(base: str, tables: int, seconds: float) -> tuple[int, float]:
    """Tables set up, ``tables`` at a time, for ``seconds``: how many and how long."""
    plan = Plan(seats=2, humans=2)
    limits = httpx.Limits(max_connections=tables + 10)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
        done = 0
        deadline = time.perf_counter() + seconds

        async def loop() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await start_table(client, plan)
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(loop() for _ in range(tables)))
        return done, time.perf_counter() - started


def _cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of the lobby (``pid``), its children and its embedded Redis."""
    redis = embedded_redis(pid)
    return {
        "lobby": cpu_s([pid]),
        "services": cpu_s(tree_pids(pid)[1:]),
        "redis": cpu_s([redis.pid]) if redis is not None else 0.0,
    }


def one_round(tree: str, processes: int | None, args: argparse.Namespace) -> dict[str, Any]:
    with server(processes, tree) as (base, process):
        asyncio.run(wait_ready(base))
        asyncio.run(_setups(base, args.tables, WARMUP_S))
        before = _cpu(process.pid)
        made, elapsed = asyncio.run(_setups(base, args.tables, args.seconds))
        after = _cpu(process.pid)
    used = {name: after[name] - before[name] for name in before}
    return {
        "tree": tree,
        "tables": made,
        "tables_per_second": round(made / elapsed, 1),
        **{f"{name}_ms_per_table": round(1000 * used[name] / made, 2) for name in used},
        "lobby_ms_per_request": round(1000 * used["lobby"] / made / REQUESTS_PER_TABLE, 3),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20, help="tables set up at once")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--old", default=None, help="another checkout, run alternately")
    parser.add_argument("--old-processes", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"new": [], "old": []}
    for _ in range(args.rounds):
        runs["new"].append(one_round(TREE, args.processes, args))
        print(json.dumps(runs["new"][-1]) if args.json else runs["new"][-1], flush=True)
        if args.old:
            runs["old"].append(one_round(args.old, args.old_processes, args))
            print(json.dumps(runs["old"][-1]) if args.json else runs["old"][-1], flush=True)
    figures = ("lobby_ms_per_table", "services_ms_per_table", "redis_ms_per_table")
    summary: dict[str, Any] = {
        side: {f: statistics.median(r[f] for r in results) for f in figures}
        for side, results in runs.items()
        if results
    }
    if args.old:
        summary["ratio_new_to_old"] = {
            f: round(summary["new"][f] / summary["old"][f], 2) for f in figures if summary["old"][f]
        }
    print(json.dumps(summary) if args.json else summary)


if __name__ == "__main__":
    sys.exit(main())
