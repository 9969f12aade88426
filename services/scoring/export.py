"""Exports of the flat results table and the seat facts, for pandas, DuckDB or Spark.

Parquet (pyarrow) or CSV. A Parquet export is a directory: ``results/`` and ``facts/``,
each partitioned by game and month (``game=navegador/month=2026-11/part-0.parquet``, hive
style, which DuckDB, pandas and Spark read as columns). A CSV export is two files,
``results.csv`` and ``facts.csv``, in a directory, or a zip of them for HTTP. Nothing in
an export is secret: these tables hold results and facts, never a log's hidden parts.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
from sqlalchemy import Engine, and_, select

from .flat import RESULTS, SEAT_FACTS

FORMATS = ("parquet", "csv")
BATCH = 50_000


@dataclass(frozen=True)
class Scope:
    """Which finished games to export."""

    game: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    experiment: str | None = None


def _where(scope: Scope) -> Any:
    c = RESULTS.c
    parts = []
    if scope.game is not None:
        parts.append(c.game == scope.game)
    if scope.since is not None:
        parts.append(c.finished_at >= scope.since)
    if scope.until is not None:
        parts.append(c.finished_at < scope.until)
    if scope.experiment is not None:
        parts.append(c.experiment == scope.experiment)
    return and_(True, *parts)


def _batches(db: Engine, query: Any) -> Iterator[pa.Table]:
    """The query's rows as Arrow tables of up to :data:`BATCH` rows."""
    with db.connect() as conn:
        result = conn.execution_options(stream_results=True).execute(query)
        columns = list(result.keys())
        while rows := result.fetchmany(BATCH):
            yield pa.Table.from_pydict({c: [r[i] for r in rows] for i, c in enumerate(columns)})


def _results_query(scope: Scope) -> Any:
    month = RESULTS.c.finished_at
    return (
        select(RESULTS, month.label("_month"))
        .where(_where(scope))
        .order_by(RESULTS.c.game_id, RESULTS.c.seat)
    )


def _facts_query(scope: Scope) -> Any:
    joined = (SEAT_FACTS.c.game_id == RESULTS.c.game_id) & (SEAT_FACTS.c.seat == RESULTS.c.seat)
    return (
        select(
            *(c for c in SEAT_FACTS.c),
            RESULTS.c.game,
            RESULTS.c.finished_at.label("_month"),
        )
        .join_from(SEAT_FACTS, RESULTS, joined)
        .where(_where(scope))
        .order_by(SEAT_FACTS.c.game_id, SEAT_FACTS.c.seat, SEAT_FACTS.c.kind)
    )


def _tables(db: Engine, scope: Scope) -> Iterator[tuple[str, Iterator[pa.Table]]]:
    yield "results", _batches(db, _results_query(scope))
    yield "facts", _batches(db, _facts_query(scope))


def _with_month(table: pa.Table) -> pa.Table:
    """The ``_month`` column (a finish time) as ``month`` = ``YYYY-MM``, for partitions."""
    moments = table.column("_month").to_pylist()
    months = pa.array([m.strftime("%Y-%m") if m is not None else "" for m in moments])
    return table.drop_columns(["_month"]).append_column("month", months)


def write_parquet(db: Engine, scope: Scope, out: Path) -> dict[str, int]:
    """A directory of Parquet datasets, partitioned by game and month; rows per table."""
    counts = {}
    for name, batches in _tables(db, scope):
        counts[name] = 0
        for i, table in enumerate(batches):
            table = _with_month(table)
            counts[name] += table.num_rows
            ds.write_dataset(
                table,
                out / name,
                format="parquet",
                partitioning=ds.partitioning(
                    pa.schema([("game", pa.string()), ("month", pa.string())]), flavor="hive"
                ),
                basename_template=f"part-{i}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",
            )
    return counts


def write_csv(db: Engine, scope: Scope, out: Path) -> dict[str, int]:
    """``results.csv`` and ``facts.csv`` in the directory ``out``; rows per table."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, batches in _tables(db, scope):
        counts[name] = 0
        with (out / f"{name}.csv").open("wb") as sink:
            first = True
            for table in batches:
                table = _with_month(table)
                counts[name] += table.num_rows
                options = pacsv.WriteOptions(include_header=first)
                pacsv.write_csv(table, sink, options)
                first = False
    return counts


def zipped(db: Engine, scope: Scope, fmt: str, folder: Path) -> bytes:
    """An export as one zip (the HTTP answer): the directory :func:`write_parquet` or
    :func:`write_csv` writes, zipped."""
    (write_parquet if fmt == "parquet" else write_csv)(db, scope, folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
