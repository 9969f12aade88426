"""The SQL schema: created at start-up by whichever services keep tables, one at a time.

The lobby and the scoring service each create the tables they need when they start
(``CREATE TABLE`` for the missing ones; existing tables are left as they are: there are no
migrations). Started together on a fresh database, two processes would both find a table
missing and both create it, and one would fail (PostgreSQL: a duplicate type; SQLite: the
table exists already). So creation runs under a lock: on PostgreSQL a transaction-level
advisory lock, held until the tables are committed; on a SQLite file, an exclusive lock on
a file beside it. The second process then finds every table there and creates nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Sequence

from sqlalchemy import Engine, Table, text
from sqlmodel import SQLModel

SCHEMA_LOCK = 0x63617276_73716C00  # any constant: "carvsql\0", the key of the advisory lock


def create_schema(db: Engine, tables: Sequence[Table] | None = None) -> None:
    """Create the missing ``tables`` (default: every table of every imported model), one
    process at a time on a database."""
    if db.dialect.name == "postgresql":
        with db.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            SQLModel.metadata.create_all(connection, tables=tables)
        return
    with _file_lock(db):
        SQLModel.metadata.create_all(db, tables=tables)


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
