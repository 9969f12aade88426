"""The SQL schema: created at start-up by whichever services keep tables, one at a time.

The lobby and the scoring service each create the tables they need when they start
(``CREATE TABLE`` for the missing ones). There are no migrations: a table that exists only
gains the columns a newer Caravel added to it, each nullable or with a server default, so
that an older database's rows stay valid (``ALTER TABLE ... ADD COLUMN``). Started together
on a fresh database, two processes would both find a table missing and both create it,
and one would fail (PostgreSQL: a duplicate type; SQLite: the table exists already). So
creation runs under a lock: on PostgreSQL a transaction-level advisory lock, held until the
tables are committed; on a SQLite file, an exclusive lock on a file beside it. The second
process then finds every table and column there and creates nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, Engine, Table, inspect, text
from sqlalchemy.schema import CreateColumn
from sqlmodel import SQLModel

SCHEMA_LOCK = 0x63617276_73716C00  # any constant: "carvsql\0", the key of the advisory lock


def create_schema(db: Engine, tables: Sequence[Table] | None = None) -> None:
    """Create the missing ``tables`` (default: every table of every imported model) and
    their missing columns, one process at a time on a database."""
    chosen = list(SQLModel.metadata.sorted_tables if tables is None else tables)
    if db.dialect.name == "postgresql":
        with db.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            _create(connection, chosen)
        return
    with _file_lock(db), db.begin() as connection:
        _create(connection, chosen)


def _create(connection: Connection, tables: Sequence[Table]) -> None:
    """Create the missing tables, then add the columns that tables made by an older Caravel
    lack: only nullable ones or ones with a server default, which existing rows can take."""
    SQLModel.metadata.create_all(connection, tables=tables)
    inspector = inspect(connection)
    for table in tables:
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present or not (column.nullable or column.server_default is not None):
                continue
            ddl = CreateColumn(column).compile(dialect=connection.dialect)
            connection.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))


@contextlib.contextmanager
def _file_lock(db: Engine) -> Iterator[None]:
    """An exclusive lock on ``<database file>.lock`` (nothing for an in-memory SQLite,
    which no other process can reach, nor for other databases)."""
    database = db.url.database
    if db.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(f"{database}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
