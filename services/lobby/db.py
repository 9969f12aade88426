"""Lobby tables in SQL (SQLModel): SQLite by default, PostgreSQL by URL."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Engine, Index, Table, event, make_url, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import configure_mappers
from sqlmodel import Field, SQLModel, create_engine

from shared.games.api import DEFAULT_GAME
from shared.sql import Migrations, migrate

MIGRATIONS = Migrations("lobby", Path(__file__).parent / "migrations", "lobby_0001", "lobby_tables")
"""The lobby's tables' revisions (:mod:`shared.sql`)."""


def _now() -> datetime:
    return datetime.now(UTC)


class LobbyTable(SQLModel, table=True):
    """A table: a game waiting for players, running, or finished (its id is the game's)."""

    __tablename__ = "lobby_tables"

    id: str = Field(primary_key=True, max_length=64)
    game: str = Field(max_length=64, sa_column_kwargs={"server_default": DEFAULT_GAME})
    ruleset: str = Field(max_length=64)
    options: dict[str, Any] = Field(
        sa_type=JSON
    )  # the edition options as chosen (defaults filled in)
    seats: int
    status: str = Field(default="open", max_length=16, index=True)  # open, running, finished
    deadline_s: float
    created_at: datetime = Field(default_factory=_now)
    # A start not yet seen through: since when the game is being created (cleared once it
    # exists). The lobby's reconciler sends the start again for a table left this way (a
    # lobby killed, Redis refusing the write) and reopens the table if the engine refuses.
    starting_since: datetime | None = Field(default=None, index=True)
    # Why the last start failed, for the players (empty: it did not).
    start_error: str = Field(default="", max_length=500, sa_column_kwargs={"server_default": ""})


HUMAN_SEAT = text("kind = 'human'")


class LobbySeat(SQLModel, table=True):
    """One taken seat. The primary key (table, seat) is what keeps two players out of one
    seat, whatever the concurrency; the unique index on (table, name) of human seats keeps
    one name to one seat (a name is rated once). Databases made before that index have the
    join's check alone."""

    __tablename__ = "lobby_seats"
    __table_args__ = (
        Index(
            "lobby_seats_one_per_name",
            "table_id",
            "name",
            unique=True,
            sqlite_where=HUMAN_SEAT,
            postgresql_where=HUMAN_SEAT,
        ),
    )

    table_id: str = Field(foreign_key="lobby_tables.id", primary_key=True, max_length=64)
    seat: int = Field(primary_key=True)
    kind: str = Field(max_length=8)  # human or bot
    name: str = Field(max_length=64)
    bot_level: str | None = Field(default=None, max_length=16)
    left: bool = False
    # Who holds the seat now: drawn anew each time it is taken, and named by the seat token,
    # so that a token outlives neither its holder's leaving nor a new holder's arrival.
    holder: str = Field(default="", max_length=64, sa_column_kwargs={"server_default": ""})


TABLES: Table = LobbyTable.__table__  # type: ignore[attr-defined]
"""The tables' SQL table, for Core statements (no unit of work where one statement does)."""
SEATS: Table = LobbySeat.__table__  # type: ignore[attr-defined]
configure_mappers()  # their attributes work on rows made by ``model_construct`` (tables.py)


SQLITE_POOL = 20
"""Connections a SQLite file's engine keeps (and as many more it may open, closed when
given back)."""


def make_engine(url: str, **options: Any) -> Engine:
    """A SQLAlchemy engine with the lobby's tables migrated to the head revision (a SQLite
    file in write-ahead-log mode: :func:`_write_ahead`)."""
    if url.startswith("sqlite"):
        options.setdefault("connect_args", {"check_same_thread": False, "timeout": 30})
        database = make_url(url).database
        if database and database != ":memory:":  # a fresh data folder: make it
            Path(database).parent.mkdir(parents=True, exist_ok=True)
            # Connections kept for the request threads (issue 24): with the default 5 kept
            # (and 10 more closed when given back), 20 requests at once opened and closed a
            # connection each (the file opened, the schema read again, the pragmas) every
            # few requests. A SQLite connection is a file handle and a page cache.
            options.setdefault("pool_size", SQLITE_POOL)
            options.setdefault("max_overflow", SQLITE_POOL)
    engine = create_engine(url, **options)
    if engine.dialect.name == "sqlite":
        _write_ahead(engine)
    migrate(engine, MIGRATIONS)
    return engine


WAL_SWITCH_TRIES = 600
WAL_SWITCH_PAUSE_S = 0.05
"""The switch to write-ahead logging waits up to 30 s (the connections' busy timeout)."""


def _write_ahead(engine: Engine) -> None:
    """A SQLite file's journal as a write-ahead log (issue 24), synced at checkpoints only.
    With the rollback journal each commit made, synced and deleted a journal file beside the
    database, and a writer locked its readers out: the lobby's threads and the services
    process (the archive, scoring) waited on each other. In WAL mode readers never wait for
    the writer and a commit appends to the log. The mode is the file's own, kept across
    connections; an in-memory database keeps its own (``memory``).

    Each connection also sets ``synchronous=NORMAL`` (a connection's own setting, so on
    each one as it is made): a commit appends to the log without an fsync, and the log is
    synced when it is checkpointed into the database. A commit survives a crash of the
    application (of any process: the log is in the file system), and the database is never
    corrupted; the last commits before a power loss or an operating system crash may be
    lost (the embedded Redis, with its default ``appendfsync always``, loses none). With ``FULL``
    each commit (five for each table set up) waited for a sync of the log."""

    @event.listens_for(engine, "connect")
    def _normal_sync(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    for attempt in range(WAL_SWITCH_TRIES):
        try:
            with engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA journal_mode=WAL")
            return
        except OperationalError as error:
            # SQLite answers "database is locked" at once, without its busy timeout, when
            # another connection holds the file while the mode changes (another process
            # creating its tables on a fresh file): wait for it as the busy timeout would.
            if "locked" not in str(error) or attempt == WAL_SWITCH_TRIES - 1:
                raise
            time.sleep(WAL_SWITCH_PAUSE_S)


class LobbyTicket(SQLModel, table=True):
    """A player waiting in the matchmaking queue, until a table is formed for them."""

    __tablename__ = "lobby_tickets"

    id: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=64)
    game: str = Field(max_length=64, sa_column_kwargs={"server_default": DEFAULT_GAME})
    ruleset: str = Field(max_length=64, sa_column_kwargs={"server_default": "standard"})
    players: int
    options: str  # JSON, canonical: tickets match when game, ruleset, players and options do
    status: str = Field(default="waiting", max_length=16, index=True)  # waiting, matched
    table_id: str | None = Field(default=None, max_length=64)
    seat: int | None = None
    created_at: datetime = Field(default_factory=_now)
