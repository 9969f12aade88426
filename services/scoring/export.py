"""Exports of the flat results table and the seat facts, for pandas, DuckDB or Spark.

Parquet (pyarrow) or CSV. A Parquet export is a directory: ``results/`` and ``facts/``,
each partitioned by game and month (``game=navegador/month=2026-11/part-….parquet``, hive
style, which DuckDB, pandas and Spark read as columns); each (table, game) is written by a
process of its own, on every core. A CSV export is two files, ``results.csv`` and
``facts.csv``, in a directory, or a zip of them for HTTP. Nothing in an export is secret:
these tables hold results and facts, never a log's hidden parts.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
from sqlalchemy import (
    URL,
    Boolean,
    DateTime,
    Engine,
    Float,
    Integer,
    Table,
    and_,
    create_engine,
    select,
)

from .flat import RESULTS, SEAT_FACTS, as_utc

FORMATS = ("parquet", "csv")
BATCH = 200_000  # rows per Arrow table written
BLOCK_ROWS = 65_536  # rows per batch SQLite's driver reads
TABLES = {"results": RESULTS, "facts": SEAT_FACTS}
PARTITIONS = ds.partitioning(
    pa.schema([("game", pa.string()), ("month", pa.string())]), flavor="hive"
)


@dataclass(frozen=True)
class Scope:
    """Which finished games to export."""

    game: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    experiment: str | None = None


def _where(table: Table, scope: Scope) -> Any:
    c = table.c
    parts = []
    if scope.game is not None:
        parts.append(c.game == scope.game)
    if scope.since is not None:  # in UTC: a literal's offset is lost on SQLite
        parts.append(c.finished_at >= as_utc(scope.since))
    if scope.until is not None:
        parts.append(c.finished_at < as_utc(scope.until))
    if scope.experiment is not None:
        parts.append(c.experiment == scope.experiment)
    return and_(True, *parts)


def _batches(db: Engine, table: Table, scope: Scope) -> Iterator[pa.Table]:
    """The rows in scope as Arrow tables of about :data:`BATCH` rows, typed by the table's
    columns, with ``month`` (``YYYY-MM``, from the finish hour) to partition by. Read by
    the database's ADBC driver straight into Arrow (PostgreSQL's binary ``COPY``, SQLite's
    own reader): no Python object per value, which is what made a row-by-row fetch slow."""
    schema = pa.schema([(c.name, _arrow_type(c.type)) for c in table.columns])
    text = str(
        select(table)
        .where(_where(table, scope))
        .compile(dialect=db.dialect, compile_kwargs={"literal_binds": True})
    )
    pending: list[pa.RecordBatch] = []
    with _adbc(db) as conn, conn.cursor() as cursor:
        if db.dialect.name == "sqlite":
            cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BLOCK_ROWS)})
        cursor.execute(text)
        for batch in cursor.fetch_record_batch():
            columns = [_typed(batch.column(i), schema.field(i).type) for i in range(len(schema))]
            pending.append(pa.RecordBatch.from_arrays(columns, schema=schema))
            if sum(b.num_rows for b in pending) >= BATCH:
                yield _with_month(pa.Table.from_batches(pending, schema))
                pending = []
    if pending:
        yield _with_month(pa.Table.from_batches(pending, schema))


def _adbc(db: Engine) -> Any:
    """An ADBC connection to the engine's database (its URL as libpq or SQLite take it)."""
    if db.dialect.name == "postgresql":
        import adbc_driver_postgresql.dbapi as postgres

        return postgres.connect(libpq_url(db.url))
    import adbc_driver_sqlite.dbapi as sqlite

    return sqlite.connect(db.url.database)


def libpq_url(url: URL) -> str:
    """A PostgreSQL URL as libpq reads it: the query's spaces as ``%20``. SQLAlchemy writes
    them as ``+``, which libpq keeps as a plus: ``options=-csearch_path=s -ctimezone=z``
    became one setting of ``search_path``, and the export found no table."""
    base = url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    pairs = [
        (key, value)
        for key, values in url.query.items()
        for value in ((values,) if isinstance(values, str) else values)
    ]
    return f"{base}?{urlencode(pairs, quote_via=quote)}" if pairs else base


def _with_month(rows: pa.Table) -> pa.Table:
    return rows.append_column("month", pc.utf8_slice_codeunits(rows["finished_hour"], 0, 7))


def _typed(column: pa.Array, kind: pa.DataType) -> pa.Array:
    """A column as the table types it: SQLite's driver types a column by its values
    (times come as UTC text without an offset, booleans as 0 and 1, a column of NULLs as
    nothing); PostgreSQL's integers as 32 bits."""
    if column.type == kind:
        return column
    if pa.types.is_timestamp(kind) and pa.types.is_string(column.type):
        return pc.assume_timezone(pc.cast(column, pa.timestamp("us")), "UTC")
    return pc.cast(column, kind)


def _arrow_type(sql: Any) -> pa.DataType:
    """The Arrow type of a column's SQL type: every file of a dataset has the same schema
    (another game's empty breakdown columns included)."""
    if isinstance(sql, Boolean):
        return pa.bool_()
    if isinstance(sql, Integer):
        return pa.int64()
    if isinstance(sql, Float):
        return pa.float64()
    if isinstance(sql, DateTime):
        return pa.timestamp("us", tz="UTC")
    return pa.string()


def _games(db: Engine, scope: Scope) -> list[str]:
    if scope.game is not None:
        return [scope.game]
    with db.connect() as conn:
        return sorted(conn.execute(select(RESULTS.c.game).distinct()).scalars())


def _write_part(task: tuple[str, str, str, Scope, str]) -> tuple[int, float]:
    """One table's rows of one game into its Parquet dataset (in a worker process): the
    rows written and the CPU seconds it took."""
    cpu = time.process_time()
    url, name, game, scope, out = task
    db = create_engine(url)
    rows = 0
    try:
        for i, batch in enumerate(_batches(db, TABLES[name], Scope(game, *_rest(scope)))):
            rows += batch.num_rows
            ds.write_dataset(
                batch,
                Path(out) / name,
                format="parquet",
                partitioning=PARTITIONS,
                basename_template=f"part-{i}-{{i}}.parquet",
                existing_data_behavior="overwrite_or_ignore",
            )
    finally:
        db.dispose()
    return rows, time.process_time() - cpu


def _rest(scope: Scope) -> tuple[datetime | None, datetime | None, str | None]:
    return scope.since, scope.until, scope.experiment


def write_parquet(db: Engine, scope: Scope, out: Path, workers: int = 0) -> dict[str, float]:
    """Parquet datasets partitioned by game and month: rows per table, and the CPU seconds
    of the writing. Each (table, game) is written by a worker process (``workers``: 0,
    every core; the workers fork from a clean server process, never from this one and its
    threads)."""
    url = db.url.render_as_string(hide_password=False)
    tasks = [(url, name, game, scope, str(out)) for name in TABLES for game in _games(db, scope)]
    counts: dict[str, float] = {**dict.fromkeys(TABLES, 0), "cpu_seconds": 0.0}
    if not tasks:
        return counts
    processes = min(len(tasks), workers or os.cpu_count() or 1)
    if processes == 1:
        written = [_write_part(task) for task in tasks]
    else:
        with multiprocessing.get_context("forkserver").Pool(processes) as pool:
            written = pool.map(_write_part, tasks)
    for (_, name, *_), (rows, cpu) in zip(tasks, written, strict=True):
        counts[name] += rows
        counts["cpu_seconds"] += cpu
    return counts


def write_csv(db: Engine, scope: Scope, out: Path) -> dict[str, float]:
    """``results.csv`` and ``facts.csv`` in the directory ``out``; rows per table."""
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, float] = {}
    cpu = time.process_time()
    for name, table in TABLES.items():
        counts[name] = 0
        with (out / f"{name}.csv").open("wb") as sink:
            for i, batch in enumerate(_batches(db, table, scope)):
                counts[name] += batch.num_rows
                pacsv.write_csv(batch, sink, pacsv.WriteOptions(include_header=i == 0))
    counts["cpu_seconds"] = time.process_time() - cpu
    return counts


def zipped(db: Engine, scope: Scope, fmt: str, folder: Path) -> bytes:
    """An export as one zip (the HTTP answer): the directory :func:`write_parquet` or
    :func:`write_csv` writes, zipped."""
    if fmt == "parquet":
        write_parquet(db, scope, folder, workers=1)  # no fork inside a server
    else:
        write_csv(db, scope, folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()
