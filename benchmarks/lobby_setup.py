"""Benchmark: the CPU a table's setup costs the server (issue 24: the table lifecycle).

    python benchmarks/lobby_setup.py --tables 20 --seconds 10 --rounds 3 [--processes 2]
        [--old TREE] [--old-processes 2] [--database-url postgresql+psycopg://...] [--json]

Each round starts ``caravel up`` of this checkout (and, with ``--old TREE``, of another one
right after it: ``git -C . archive REV | tar -x -C TREE``, so both meet the same load on a
shared machine) and sets tables up closed loop, ``--tables`` at a time, for ``--seconds``
after a warm-up: what the peers benchmark does between two games (``POST /tables`` of two
seats, two ``POST /tables/{id}/join``, ``POST /tables/{id}/start``, which answers once the
game's first view is written). The games are not played. The tables are in the server's
SQLite file, or with ``--database-url`` in a PostgreSQL schema of each round's own.

It prints, per table set up and per request (four a table), the CPU (user + system, from
/proc) of the lobby process (``caravel up`` itself), of the other Python processes (its
children: engine, bots, scoring, views) and of the embedded Redis, less what each uses idle
(measured over ``IDLE_S`` just before, and printed as ``*_idle_ms_per_s``: the loops that
poll whether or not tables are made); the last line is the medians, and with ``--old`` the
ratios of this checkout's to the other's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any

import httpx
from scratch import postgres_schema  # beside this script

from services.capacity import Plan, server, start_table, wait_ready
from services.usage import cpu_s, embedded_redis, tree_pids

TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUESTS_PER_TABLE = 4  # create, two joins, start
WARMUP_S = 2.0
IDLE_S = 4.0  # the server's CPU while no table is set up, taken off the figures


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
    with contextlib.ExitStack() as held:
        settings = {}
        if args.database_url:
            settings["database_url"] = held.enter_context(postgres_schema(args.database_url))
        return _measured(tree, processes, args, settings)


def _measured(
    tree: str, processes: int | None, args: argparse.Namespace, settings: dict[str, str]
) -> dict[str, Any]:
    with server(processes, tree, **settings) as (base, process):
        asyncio.run(wait_ready(base))
        asyncio.run(_setups(base, args.tables, WARMUP_S))
        before = _cpu(process.pid)
        time.sleep(IDLE_S)
        idle = _cpu(process.pid)
        made, elapsed = asyncio.run(_setups(base, args.tables, args.seconds))
        after = _cpu(process.pid)
    rate = {name: (idle[name] - before[name]) / IDLE_S for name in before}  # CPU s per s
    used = {name: after[name] - idle[name] - rate[name] * elapsed for name in before}
    return {
        "tree": tree,
        "tables": made,
        "tables_per_second": round(made / elapsed, 1),
        **{f"{name}_ms_per_table": round(1000 * used[name] / made, 2) for name in used},
        "lobby_ms_per_request": round(1000 * used["lobby"] / made / REQUESTS_PER_TABLE, 3),
        **{f"{name}_idle_ms_per_s": round(1000 * rate[name], 1) for name in rate},
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
    parser.add_argument("--database-url", default=None, help="PostgreSQL (a schema of its own)")
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
        side: {f: round(statistics.median(r[f] for r in results), 2) for f in figures}
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
