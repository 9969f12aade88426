"""Benchmark: a move -> the other seat's WebSocket message, at a rate offered over many tables.

    python benchmarks/peers/latency.py --tables 200 --rate 100 --seconds 30 [--processes N]
        [--game age_of_discovery] [--setting NAME=VALUE ...] [--json]

A fresh ``caravel up`` (this checkout) and ``--tables`` two-seat tables, both seats human,
each holding its WebSocket and sending its moves on it; each seat thinks a time drawn from 0
to twice tables/rate seconds, so that all of them offer about ``--rate`` moves/s. The figure
is the time from a ``command`` frame sent to the first event after the decision's version
reaching the *other* seat's socket (p50, p99), with refused and lost moves counted
(``services/capacity.py`` is the driver; ``caravel bench capacity`` uses it at a human pace).
"""

from __future__ import annotations

import argparse
import asyncio
import json

from services.capacity import Plan, live_tables, parse_settings, server, wait_ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--processes", type=int, default=None, help="CARAVEL_PROCESSES")
    parser.add_argument("--game", default="age_of_discovery")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the server (CARAVEL_NAME, e.g. embedded_fsync=everysec), repeatable",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        settings = parse_settings(args.setting)
    except ValueError as error:
        parser.error(str(error))
    mean = args.tables / args.rate
    plan = Plan(game=args.game, seats=2, humans=2, think=(0.0, 2 * mean), watch_other=True)
    with server(args.processes, **settings) as (base, process):
        asyncio.run(wait_ready(base))
        result = asyncio.run(live_tables(base, process.pid, args.tables, args.seconds, plan))
    result["offered_per_second"] = args.rate
    result["processes"] = args.processes
    result["settings"] = settings
    print(json.dumps(result) if args.json else result)


if __name__ == "__main__":
    main()
