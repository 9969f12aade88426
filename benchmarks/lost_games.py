"""The cost of the lobby's look for lost games (``services.lobby.tables.LostGames``): the
matchmaker's reconciling round with ``--tables`` running tables whose games exist, on this
checkout (a page of the look every round: ``CARAVEL_LOST_GAME_CHECK_S`` near 0, its worst
case) against another checkout's round (``--tree``, which may have no such look),
alternated. Per round: CPU of the lobby process (``time.process_time``), of its PostgreSQL
backends (``/proc`` through psutil, by ``application_name``) and of a Redis of its own
(``INFO cpu``, the whole server, started here without persistence on ``--redis-port``).

    python benchmarks/lost_games.py --tables 5000 --rounds 30 --pairs 3 --tree /tmp/base \\
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/test

Run from the repository's root; each side runs in a subprocess of its own
(``PYTHONPATH=<tree>``). Prints JSON lines: one per side and pair, then the ratios."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
APP = "lostbench"


async def _child(args: argparse.Namespace) -> None:
    """One side's rounds, measured (run with that side's tree on PYTHONPATH)."""
    import psutil
    import structlog
    from sqlalchemy import text

    from services.lobby.db import make_engine
    from services.lobby.lobby import Lobby
    from services.lobby.matchmaking import Matchmaker
    from shared.bus import Keys, connect
    from shared.settings import Settings

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    keys = Keys(prefix=args.prefix, partitions=64)
    options: dict[str, Any] = {"key_prefix": keys.prefix, "partitions": 64, "secret": "x"}
    if "lost_game_check_s" in Settings.model_fields:
        options["lost_game_check_s"] = 0.000001  # a page every round: the worst case
    db = make_engine(args.database_url)
    redis = connect(args.redis_url)
    lobby = Lobby(redis, keys, db, Settings(**options))
    matchmaker = Matchmaker(lobby, wait_s=60, reconcile_s=0)  # a reconciling round each
    try:
        for _ in range(args.warmup):
            await matchmaker.round()
        with db.connect() as conn:
            query = text("SELECT pid FROM pg_stat_activity WHERE application_name = :a")
            backends = [psutil.Process(pid) for (pid,) in conn.execute(query, {"a": APP})]

        def sql_cpu() -> float:
            return sum(sum(p.cpu_times()[:2]) for p in backends)

        async def redis_cpu() -> float:
            info = await redis.info("cpu")
            return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

        r0, s0, c0, w0 = await redis_cpu(), sql_cpu(), time.process_time(), time.monotonic()
        for _ in range(args.rounds):
            await matchmaker.round()
        c1, w1, s1, r1 = time.process_time(), time.monotonic(), sql_cpu(), await redis_cpu()
        per = 1e6 / args.rounds
        print(
            json.dumps(
                {
                    "lobby_us": round((c1 - c0) * per),
                    "postgres_us": round((s1 - s0) * per),
                    "redis_us": round((r1 - r0) * per),
                    "wall_ms": round((w1 - w0) * per / 1000, 2),
                }
            )
        )
    finally:
        await lobby.close()
        await redis.aclose()
        db.dispose()


def _populate(database_url: str, redis_url: str, prefix: str, tables: int) -> None:
    """``tables`` running tables of two bots, their starts done, and their games' meta in
    Redis (what the look reads of a game that exists)."""
    import redis as sync_redis
    from sqlalchemy import insert

    from services.lobby.db import SEATS, TABLES, make_engine
    from shared.bus import Keys

    keys = Keys(prefix=prefix, partitions=64)
    ids = [f"t-{uuid.uuid4().hex[:12]}" for _ in range(tables)]
    db = make_engine(database_url)
    rows = [
        {"id": t, "ruleset": "standard", "options": {}, "seats": 2, "deadline_s": 60.0} for t in ids
    ]
    seats = [
        {"table_id": t, "seat": s, "kind": "bot", "name": f"b{s}", "bot_level": "random"}
        for t in ids
        for s in (0, 1)
    ]
    with db.begin() as conn:
        conn.execute(insert(TABLES), [{**r, "status": "running"} for r in rows])
        conn.execute(insert(SEATS), seats)
    db.dispose()
    client = sync_redis.Redis.from_url(redis_url)
    pipe = client.pipeline(transaction=False)
    for t in ids:
        pipe.hset(keys.meta(t), "version", 1)
    pipe.execute()
    client.close()


def _side(tree: str, args: argparse.Namespace, url: str, redis_url: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": tree}
    command = [sys.executable, str(HERE), "--child", "--prefix", args.prefix]
    command += ["--database-url", url, "--redis-url", redis_url]
    command += ["--rounds", str(args.rounds), "--warmup", str(args.warmup)]
    out = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tree", default="", help="the other checkout (none: this one alone)")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--redis-port", type=int, default=6397)
    parser.add_argument("--prefix", default=f"lostbench-{uuid.uuid4().hex[:6]}")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:  # the side's tree alone: not this script's folder's modules
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE.parent]
        asyncio.run(_child(args))
        return
    sys.path.insert(0, str(HERE.parent.parent))
    from benchmarks.scratch import postgres_schema

    folder = tempfile.mkdtemp(prefix="lostbench-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(args.redis_port), "--save", "", "--appendonly", "no"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
    )
    redis_url = f"redis://127.0.0.1:{args.redis_port}/0"
    try:
        time.sleep(0.5)
        with postgres_schema(args.database_url) as schema_url:
            url = f"{schema_url}&application_name={APP}"  # the schema's URL has a query
            _populate(url, redis_url, args.prefix, args.tables)
            trees = {"this": str(HERE.parent.parent)}
            if args.tree:
                trees["other"] = args.tree
            figures: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for pair in range(args.pairs):
                for name, tree in trees.items():
                    found = _side(tree, args, url, redis_url)
                    load = os.getloadavg()[0]
                    figures[name].append(found)
                    print(json.dumps({"pair": pair, "side": name, "load": load, **found}))
            if args.tree:
                ratios = {
                    k: [
                        round(a[k] / b[k], 2) if b[k] else None
                        for a, b in zip(figures["this"], figures["other"], strict=True)
                    ]
                    for k in figures["this"][0]
                }
                print(json.dumps({"ratios this/other": ratios}))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
