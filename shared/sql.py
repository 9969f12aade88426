"""The SQL schema: migrated at start-up by whichever services keep tables, one at a time.

The lobby and the scoring service each keep their tables under Alembic migrations: the
revisions of one are in its package's ``migrations`` folder, and the revision a database is
at is in a version table of its own (``alembic_version_lobby``, ``alembic_version_scoring``),
so that the two can share a database or not. Each service upgrades its tables to the head
revision when it starts (``caravel db upgrade`` does so without starting one). A database
made before the migrations (its tables there, no version table) is stamped at the baseline
revision, the schema of the release that made it, then upgraded.

Started together on a fresh database, two processes would both find a table missing and
both create it, and one would fail. So migrating runs under a lock: on PostgreSQL a
transaction-level advisory lock, held until the migration is committed; on a SQLite file,
an exclusive lock on a file beside it. The second process then finds the head revision and
does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import Connection, Engine, Table, inspect, text
from sqlmodel import SQLModel

SCHEMA_LOCK = 0x63617276_73716C00  # any constant: "carvsql\0", the key of the advisory lock
ENVIRONMENT = Path(__file__).parent / "migrations"  # env.py: what every component runs


@dataclass(frozen=True)
class Migrations:
    """One component's migrations: its revisions, its version table, and how to tell a
    database its baseline made before the migrations (a table of the baseline there)."""

    name: str
    versions: Path
    baseline: str  # the revision of the schema of the last release without migrations
    baseline_table: str

    @property
    def version_table(self) -> str:
        return f"alembic_version_{self.name}"

    def config(self, connection: Connection) -> Config:
        """Alembic's configuration, in code (no ``alembic.ini``): the shared environment,
        this component's revisions, and the connection to migrate on."""
        config = Config()
        config.set_main_option("script_location", str(ENVIRONMENT))
        config.set_main_option("version_locations", str(self.versions))
        config.set_main_option("path_separator", "os")
        config.attributes["connection"] = connection
        config.attributes["version_table"] = self.version_table
        return config


def migrate(db: Engine, migrations: Migrations, revision: str = "head") -> None:
    """Upgrade ``migrations``' tables to ``revision``, one process at a time on a database;
    a database of the release before the migrations is stamped at the baseline first."""
    with _schema_lock(db) as connection:
        config = migrations.config(connection)
        tables = inspect(connection).get_table_names()
        if migrations.version_table not in tables and migrations.baseline_table in tables:
            command.stamp(config, migrations.baseline)
        command.upgrade(config, revision)


def current(db: Engine, migrations: Migrations) -> str | None:
    """The revision ``migrations``' tables are at (None: not made yet)."""
    with db.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"version_table": migrations.version_table}
        )
        return context.get_current_revision()


def create_tables(db: Engine, tables: Sequence[Table]) -> None:
    """Create the missing ``tables``, one process at a time on a database: for a table that
    has never changed (the event store's archive), which needs no migrations yet."""
    with _schema_lock(db) as connection:
        SQLModel.metadata.create_all(connection, tables=list(tables))


@contextlib.contextmanager
def _schema_lock(db: Engine) -> Iterator[Connection]:
    """A transaction holding the schema lock: PostgreSQL's advisory lock, or a file's."""
    if db.dialect.name == "postgresql":
        with db.begin() as connection:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
            yield connection
        return
    with _file_lock(db), db.begin() as connection:
        yield connection


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
