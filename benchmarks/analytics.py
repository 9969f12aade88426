"""The analytics API and export over many finished games: latency per filter (p50, p95)
over real HTTP, and the time to export everything to Parquet.

The games come from ``caravel lab run`` into a SQLite file (``--source``): this copies
them into a scratch database (a SQLite file, or a PostgreSQL schema of its own with
``--database-url``), serves the scoring routes on it with uvicorn, and asks a spread of
filters (every game, an experiment, a player count, an option, a seat kind, games of bots
only, a ruleset by hash, a period on whole hours, an A/B comparison) in turn. Timed apart:
a period off the hour (its whole hours from the hourly cells, its ends from the finer
ones), one starting inside the hour the lab's games finished in (that hour's minutes from
the minute cells), and one whose ends split the two seconds that hold the most games in
halves (half of their games from the flat table: the worst case). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine, create_engine, func, insert, select

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scratch import postgres_schema

from services.lobby.db import make_engine
from services.scoring import cells, flat
from services.scoring.db import create_tables
from services.scoring.export import Scope, write_parquet
from services.scoring.http import router
from shared.httpapi import install_error_handlers


def copy(source: Engine, target: Engine, copies: int) -> int:
    """The lab's rows from ``source`` into ``target`` (``copies`` times, each copy's games
    and experiments renamed ``…-c<k>``); their cells summed there."""
    create_tables(target)
    for table in (flat.EXPERIMENTS, flat.RESULTS, flat.SEAT_FACTS):
        with source.connect() as src, target.begin() as dst:
            result = src.execution_options(stream_results=True).execute(select(table))
            while rows := result.fetchmany(20_000):
                for k in range(copies):
                    dst.execute(insert(table), [_renamed(dict(r._mapping), k) for r in rows])
    with target.begin() as conn:
        for name in conn.execute(select(flat.EXPERIMENTS.c.name)).scalars().all():
            cells.refresh_all(conn, name)
        return int(conn.execute(select(func.count()).select_from(flat.RESULTS)).scalar_one())


def _renamed(row: dict[str, Any], k: int) -> dict[str, Any]:
    for key in ("game_id", "experiment", "name"):
        if row.get(key):
            row[key] = f"{row[key]}-c{k}"
    return row


@contextmanager
def serving(db: Engine) -> Iterator[str]:
    app = FastAPI()
    app.state.db = db
    install_error_handlers(app)
    app.include_router(router)
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


def filters(db: Engine) -> list[tuple[str, dict[str, Any]]]:
    with db.connect() as conn:
        experiments = conn.execute(
            select(
                flat.EXPERIMENTS.c.name, flat.EXPERIMENTS.c.game, flat.EXPERIMENTS.c.ruleset_hash
            )
        ).all()
        first = conn.execute(select(func.min(flat.RESULTS.c.finished_hour))).scalar_one()
    out: list[tuple[str, dict[str, Any]]] = []
    for game in sorted({g for _, g, _ in experiments}):
        mine = [e for e in experiments if e[1] == game]
        out += [
            ("/analytics/figures", {"game": game}),
            ("/analytics/figures", {"game": game, "experiment": mine[0][0]}),
            ("/analytics/figures", {"game": game, "players": 4}),
            ("/analytics/figures", {"game": game, "seat_kind": "bot:greedy"}),
            ("/analytics/figures", {"game": game, "seats": "bots"}),
            ("/analytics/figures", {"game": game, "ruleset": mine[0][2]}),
            ("/analytics/figures", {"game": game, "since": f"{first}:00:00+00:00"}),
            (
                "/analytics/compare",
                {"a": f"game={game}&experiment={mine[0][0]}", "b": f"game={game}&players=4"},
            ),
        ]
        if game == "age_of_discovery":
            out.append(("/analytics/figures", {"game": game, "option": "factory_income=30"}))
    return out


def busiest_seconds(db: Engine, game: str) -> tuple[str, str]:
    """A period whose ends split the two seconds of ``game`` that hold the most games in
    halves (each end a microsecond after the middle game's finish): the worst case of the
    cells, half of each second's games read from the flat table. From the flat table, so
    that it runs on any revision."""
    c = flat.RESULTS.c
    with db.connect() as conn:
        held = conn.execute(select(c.finished_at).where(c.game == game, c.seat == 0))
        utc = (m.astimezone(UTC) if m.tzinfo else m.replace(tzinfo=UTC) for m in held.scalars())
        seconds: dict[datetime, list[datetime]] = {}
        for moment in utc:
            seconds.setdefault(moment.replace(microsecond=0), []).append(moment)
    busiest = sorted(seconds.values(), key=len)[-2:]
    ends = sorted(sorted(games)[len(games) // 2] + timedelta(microseconds=1) for games in busiest)
    return ends[0].isoformat(), ends[1].isoformat()


def _count(db: Engine) -> int:
    with db.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(flat.RESULTS)).scalar_one())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(base: str, asks: list[tuple[str, dict[str, Any]]], rounds: int) -> dict[str, Any]:
    times: list[float] = []
    cpu = 0.0
    with httpx.Client(base_url=base, timeout=120) as client:
        for path, params in asks:  # warm: the first read of each table
            client.get(path, params=params).raise_for_status()
        for _ in range(rounds):
            for path, params in asks:
                started, used = time.perf_counter(), time.process_time()
                client.get(path, params=params).raise_for_status()
                times.append(1000 * (time.perf_counter() - started))
                cpu += time.process_time() - used
    return {
        "requests": len(times),
        "p50_ms": round(percentile(times, 0.5), 1),
        "p95_ms": round(percentile(times, 0.95), 1),
        "max_ms": round(max(times), 1),
        "mean_ms": round(statistics.fmean(times), 1),
        # this process's CPU per request (client and server; a PostgreSQL server's not):
        # less noisy than the wall clock on a loaded machine
        "cpu_ms": round(1000 * cpu / len(times), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, help="SQLite URL of the lab's games")
    parser.add_argument("--database-url", help="PostgreSQL URL (a scratch schema is made)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--copies", type=int, default=1, help="Copies of the source's games (0: use it as is)."
    )
    parser.add_argument("--keep", help="Copy into this SQLite file and keep it.")
    parser.add_argument("--export", action="store_true", help="Also time a Parquet export.")
    args = parser.parse_args()
    source = create_engine(args.source)
    with tempfile.TemporaryDirectory() as folder:
        where = (
            postgres_schema(args.database_url)
            if args.database_url
            else nullcontext(f"sqlite:///{folder}/analytics.db")
        )
        with where as url:
            if args.keep:  # the copy is kept in this SQLite file, for later runs
                url = f"sqlite:///{args.keep}"
            if not args.copies:  # the source itself
                url = args.source
            db = make_engine(url)
            started = time.perf_counter()
            rows = copy(source, db, args.copies) if args.copies else _count(db)
            out: dict[str, Any] = {
                "database": db.dialect.name,
                "result_rows": rows,
                "games": rows // 4,
                "copy_and_cells_s": round(time.perf_counter() - started, 1),
            }
            asks = filters(db)
            with serving(db) as base:
                out["filters"] = len(asks)
                out["api"] = measure(base, asks, args.rounds)
                game = asks[0][1]["game"]
                flat_path = [
                    ("/analytics/figures", {"game": game, "since": "2000-01-01T00:00:01Z"})
                ]
                out["api_period_off_the_hour"] = measure(base, flat_path, 2)
                with db.connect() as conn:
                    first = conn.execute(select(func.min(flat.RESULTS.c.finished_hour)))
                    inside = f"{first.scalar_one()}:15:00+00:00"  # its games' first hour
                burst = [("/analytics/figures", {"game": game, "since": inside})]
                out["api_period_inside_the_first_hour"] = measure(base, burst, 2)
                since, until = busiest_seconds(db, game)
                ends = [("/analytics/figures", {"game": game, "since": since, "until": until})]
                out["api_period_ends_inside_the_busiest_seconds"] = measure(base, ends, 5)
            if args.export:
                started, cpu = time.perf_counter(), time.process_time()
                counts = write_parquet(db, Scope(), Path(folder) / "export")
                counts["cpu_seconds"] += time.process_time() - cpu  # the workers' and ours
                out["export"] = {
                    **{k: round(v, 2) for k, v in counts.items()},
                    "seconds": round(time.perf_counter() - started, 2),
                }
            db.dispose()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
