"""Benchmark: Caravel against a peer (boardgame.io), and against another Caravel checkout.

    python benchmarks/peers/run.py --tables 20 --seconds 20 --rounds 2 [--mode ws|http]
        [--game age_of_discovery] [--old /tmp/caravel-base --old-mode http] [--no-bgio]
        [--processes N] [--old-processes N] [--apart [--apart-redis tcp|unix]]
        [--client lean|httpx] [--setting NAME=VALUE] [--json]

Each round runs, one after the other (alternating, so both meet the same load on a shared
machine), a closed loop of ``--tables`` two-seat tables, one move in flight per table:

- boardgame.io (its server from npm in a temporary folder, in-memory storage, a game of
  one move per turn, clients over socket.io): see ``boardgameio.py``;
- this checkout's ``caravel up`` (``--mode ws``: moves over the seats' WebSockets; ``http``:
  ``POST /commands?legal=true`` plus ``GET /legal`` of the other seat, each table's on a
  keep-alive connection of its own through ``lean_http.py``; ``--client httpx``: through
  httpx, whose CPU per request made the driver the limit, issue 24);
- with ``--old TREE``: ``caravel up`` of another checkout (``git archive REV | tar -x -C
  TREE``) on ``--old-mode``, for before/after figures.

``--apart`` runs each checkout's services as a deployment that runs them apart would:
``caravel part lobby``, ``engine``, ``ai``, ``scoring`` and ``views``, each a process of its
own, on a ``redis-server`` started for the round (no persistence; reached over TCP, or with
``--apart-redis unix`` over a unix socket, as a deployment apart on one host may); the CPU
per move is
then their sum with that Redis', and each one's (``cpu_ms_per_move_by_process``).

Each prints moves/s, the server's CPU per move (user + system, from /proc: its whole
process tree, lobby children included, and its embedded Redis, which daemonizes and so is
no child: ``services/usage.py`` finds it; Python, Redis and total apart), Caravel's Redis
commands per move by name (``INFO commandstats`` before and after) and each move's round
trip; the last line is the medians and the ratios to boardgame.io.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its modules, beside it

import boardgameio
import caravel_loop

from services.capacity import parse_settings, wait_ready

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))


def caravel_round(
    tree: str,
    mode: str,
    args: argparse.Namespace,
    label: str,
    processes: int | None = None,
    settings: dict[str, str] | None = None,
) -> dict[str, Any]:
    def loop(base: str, server: Any) -> dict[str, Any]:
        lean = args.client == "lean"
        run = caravel_loop.closed_loop
        return asyncio.run(
            run(base, server, mode, args.tables, args.seconds, args.game, args.warmup, lean)
        )

    if args.apart:
        unix = args.apart_redis == "unix"
        with caravel_loop.caravel_apart(sys.executable, tree, unix) as (base, apart):
            result = loop(base, apart)
        result["system"] = f"{label} ({mode}, apart{', redis on a unix socket' if unix else ''})"
        return result
    settings = settings or {}
    with caravel_loop.caravel_up(sys.executable, tree, processes, **settings) as (base, server):
        asyncio.run(wait_ready(base))
        result = loop(base, server)
    chosen = "".join(f", {name}={value}" for name, value in settings.items())
    result["system"] = f"{label} ({mode}{f', {processes} processes' if processes else ''}{chosen})"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", choices=("ws", "http"), default="ws")
    parser.add_argument("--game", default="age_of_discovery")
    parser.add_argument("--old", default=None, help="another checkout to alternate with")
    parser.add_argument("--old-mode", choices=("ws", "http"), default="http")
    parser.add_argument("--no-bgio", action="store_true", help="leave boardgame.io out")
    parser.add_argument("--processes", type=int, default=None, help="CARAVEL_PROCESSES (unset)")
    parser.add_argument("--old-processes", type=int, default=None, help="the --old one's")
    parser.add_argument(
        "--apart",
        action="store_true",
        help="each service a `caravel part` process of its own on a redis-server started here",
    )
    parser.add_argument(
        "--apart-redis",
        choices=("tcp", "unix"),
        default="tcp",
        help="--apart: how the processes reach their Redis: TCP on 127.0.0.1, or a unix "
        "socket (a deployment apart on one host: CARAVEL_REDIS_URL=unix://PATH)",
    )
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="--mode http's client for the moves: a keep-alive connection per table over "
        "asyncio streams (lean_http.py), or httpx (before: the driver's CPU was the limit)",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of this checkout's server (CARAVEL_NAME, e.g. embedded_fsync=everysec; "
        "not the --old one's), repeatable",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        settings = parse_settings(args.setting)
    except ValueError as error:
        parser.error(str(error))
    results: list[dict[str, Any]] = []
    peer = None if args.no_bgio else boardgameio.install()
    for _ in range(args.rounds):
        if peer is not None:
            results.append(boardgameio.run(peer, args.tables, args.seconds, args.warmup))
            print(json.dumps(results[-1]), flush=True)
        results.append(caravel_round(TREE, args.mode, args, "caravel", args.processes, settings))
        print(json.dumps(results[-1]), flush=True)
        if args.old:
            results.append(
                caravel_round(args.old, args.old_mode, args, "caravel old", args.old_processes)
            )
            print(json.dumps(results[-1]), flush=True)
    print(json.dumps(summary(results)) if args.json else summary(results))


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each system's median moves/s and CPU per move, and Caravel's ratios to boardgame.io."""
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault(r["system"], []).append(r)
    out: dict[str, Any] = {}
    for system, runs in by.items():
        rates = sorted(r["moves_per_second"] for r in runs)
        out[system] = {"moves_per_second": rates}
        for figure in (
            "server_cpu_ms_per_move",
            "lobby_cpu_ms_per_move",
            "services_cpu_ms_per_move",
            "redis_cpu_ms_per_move",
            "redis_commands_per_move",
        ):
            if figure in runs[0]:
                out[system][figure] = sorted(r[figure] for r in runs)
        if "cpu_ms_per_move_by_process" in runs[0]:  # --apart: each run's, in order
            out[system]["cpu_ms_per_move_by_process"] = [
                r["cpu_ms_per_move_by_process"] for r in runs
            ]
    peer = out.get("boardgame.io")
    if peer:
        for system, figures in out.items():
            if system == "boardgame.io":
                continue
            figures["moves_ratio_to_bgio"] = round(
                _median(figures["moves_per_second"]) / _median(peer["moves_per_second"]), 3
            )
            figures["cpu_ratio_to_bgio"] = round(
                _median(figures["server_cpu_ms_per_move"])
                / _median(peer["server_cpu_ms_per_move"]),
                2,
            )
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else 0.0


if __name__ == "__main__":
    main()
