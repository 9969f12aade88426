"""The scoring projection's tables (SQLModel): SQLite by default, PostgreSQL by URL.

Every row is a function of the game logs alone (times come from the events' ``recorded_at``,
never from a clock), so a rebuild writes exactly what the live projection wrote.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Dialect,
    Engine,
    Executable,
    Table,
    bindparam,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Field, SQLModel

from shared.sql import Migrations, migrate

from . import cells, flat

PROJECTION = "scoring"
MIGRATIONS = Migrations(
    "scoring", Path(__file__).parent / "migrations", "scoring_0001", "scoring_games"
)
"""The scoring tables' revisions (:mod:`shared.sql`)."""


class Checkpoint(SQLModel, table=True):
    """How far a projection has read each stream: written in the transaction of its rows."""

    __tablename__ = "projection_checkpoints"

    projection: str = Field(primary_key=True, max_length=32)
    stream: str = Field(primary_key=True, max_length=200)
    last_id: str = Field(max_length=40)


class ScoredGame(SQLModel, table=True):
    """One game as the projection knows it: analytics per game, and its applied version."""

    __tablename__ = "scoring_games"

    game_id: str = Field(primary_key=True, max_length=64)
    game: str = Field(max_length=64, index=True)  # the registry's name of what is played
    version: int  # the last event applied: later notifications at or below it are no-ops
    # That event's id: a log that went back (a failover) has another event, or none, at
    # ``version``. None: a row written before Caravel kept it (the version alone is checked).
    event_id: str | None = Field(default=None, max_length=100)  # older logs: "<game>:<v>"
    status: str = Field(max_length=16, index=True)  # running, finished
    ruleset: str = Field(max_length=64)
    options: str  # JSON, keys sorted
    players: int
    decisions: int
    created_at: datetime
    finished_at: datetime | None = Field(default=None, index=True)
    duration_s: float | None = None
    winners: list[int] | None = Field(
        default=None, sa_type=JSON(none_as_null=True)
    )  # seats placed first
    finish_key: str | None = Field(default=None, max_length=120, index=True)


class Standing(SQLModel, table=True):
    """The live score of one seat: the game's own breakdown of its total, kept as JSON so
    that one table serves every game. It is the seat's score at the version of the game's
    row (:class:`ScoredGame`): a row is written only when the seat's score changes, in the
    transaction that writes the game's row (so it has no version of its own)."""

    __tablename__ = "scoring_standings"

    game_id: str = Field(primary_key=True, max_length=64)
    seat: int = Field(primary_key=True)
    game: str = Field(max_length=64)
    player: str = Field(max_length=100)
    breakdown: dict[str, int] = Field(sa_type=JSON)  # the parts of the total, in the game's order
    total: int
    place: int


class Result(SQLModel, table=True):
    """A seat's final result (places by the game's tie-breakers, from its rules core)."""

    __tablename__ = "scoring_results"

    game_id: str = Field(primary_key=True, max_length=64)
    seat: int = Field(primary_key=True)
    game: str = Field(max_length=64, index=True)
    player: str = Field(max_length=100, index=True)
    seat_kind: str = Field(max_length=32)  # human, bot:<level>
    side: str = Field(max_length=32)  # what the seat plays: a nation, a colour
    place: int
    won: bool
    breakdown: dict[str, int] = Field(sa_type=JSON)  # as in standings
    total: int
    tiebreak: list[int] = Field(sa_type=JSON)  # the keys that ordered equal totals


class Rating(SQLModel, table=True):
    """A player's openskill (Plackett-Luce) rating at one game: skill at one game says
    little of another. Bots are players named ``bot:<level>``."""

    __tablename__ = "scoring_ratings"

    game: str = Field(primary_key=True, max_length=64)
    player: str = Field(primary_key=True, max_length=100)
    mu: float
    sigma: float
    ordinal: float = Field(index=True)  # mu - 3 sigma: what leaderboards sort by
    games: int
    wins: int
    last_game: str = Field(max_length=64)
    updated_at: datetime


class RatingChange(SQLModel, table=True):
    """One rated game of one player, in finish order: lets a late finisher be slotted in."""

    __tablename__ = "scoring_rating_history"

    finish_key: str = Field(primary_key=True, max_length=120)
    player: str = Field(primary_key=True, max_length=100)
    game: str = Field(max_length=64, index=True)
    game_id: str = Field(max_length=64)
    won: bool
    mu_before: float
    sigma_before: float
    mu_after: float
    sigma_after: float


class Decision(SQLModel, table=True):
    """One decision of a seat: who took it and how long after it was asked for."""

    __tablename__ = "analytics_decisions"

    game_id: str = Field(primary_key=True, max_length=64)
    version: int = Field(primary_key=True)  # the first event of the command
    seat: int
    seat_kind: str = Field(max_length=32, index=True)  # human, bot:<level>, fallback
    kind: str = Field(max_length=32)  # what was decided: the game's name for the step
    latency_ms: float


class FactRow(SQLModel, table=True):
    """A game-specific analytics fact (the game's ``facts`` hook: a building bought, a
    region discovered): the game's analytics are queries over these by ``kind``."""

    __tablename__ = "analytics_facts"

    game_id: str = Field(primary_key=True, max_length=64)
    version: int = Field(primary_key=True)  # the event that produced it
    seq: int = Field(primary_key=True)  # its place among that event's facts
    seat: int
    kind: str = Field(max_length=32, index=True)
    subject: str = Field(max_length=64)
    value: int


def table_of(model: type[SQLModel]) -> Table:
    """The SQLAlchemy table of a model, for Core statements (bulk upserts, selects)."""
    return model.__table__  # type: ignore[attr-defined, no-any-return]


TABLES: list[Table] = [
    *(
        table_of(model)
        for model in (
            Checkpoint,
            ScoredGame,
            Standing,
            Result,
            Rating,
            RatingChange,
            Decision,
            FactRow,
        )
    ),
    *flat.KEPT,
    cells.CELLS,
    cells.FINE,
]


def create_tables(db: Engine) -> None:
    """Migrate the projection's tables to the head revision (under the schema lock: see
    shared.sql)."""
    migrate(db, MIGRATIONS)


def clear_tables(db: Engine) -> None:
    """Delete the projection's rows (and only those): of the flat analytics tables, which
    hold the lab's experiments too, only the projected rows go. The tables stay, at their
    revision."""
    kept = [*flat.KEPT, cells.CELLS, cells.FINE]
    with db.begin() as conn:
        for table in reversed(TABLES):
            if table not in kept:
                conn.execute(table.delete())
        flat.delete_projected(conn)
        cells.delete_projected(conn)


def upsert(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert ``rows``, replacing the existing row of the same primary key: one statement
    per batch, so that replaying an event writes the same row again instead of failing.

    On SQLite, rows that name every column of the table go to the driver's ``executemany``
    as tuples (:func:`_driver_upsert`), each value through its column type's own bind
    processor: the same SQL, the same stored values, without SQLAlchemy's per-row parameter
    building (about half of an upsert's CPU; scoring upserts every game that moved and its
    seats' standings on every commit, issue 24)."""
    if not rows:
        return
    if conn.dialect.name == "sqlite" and (
        driver := _driver_upsert(conn.dialect, table, frozenset(rows[0]))
    ):
        sql, pick, processors = driver
        params = [pick(row) for row in rows]
        if processors:
            params = [_processed(values, processors) for values in params]
        conn.exec_driver_sql(sql, params)
        return
    conn.execute(_upsert_statement(conn.dialect.name, table), list(rows))


Processors = tuple[tuple[int, Callable[[Any], Any]], ...]


@functools.cache
def _driver_upsert(
    dialect: Dialect, table: Table, keys: frozenset[str]
) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]], Processors] | None:
    """:func:`upsert`'s statement compiled for ``dialect`` (positional), a getter of a row's
    values in its parameters' order and the bind processors of the columns that have one
    (JSON, dates and times, booleans), by position. None when the rows do not name every
    column (``keys``: the first row's): SQLAlchemy fills the others' defaults then."""
    if keys != {c.key for c in table.columns}:
        return None
    statement: Any = _upsert_statement(dialect.name, table)
    compiled = statement.compile(dialect=dialect)
    names = compiled.positiontup
    if names is None or set(names) != keys or len(names) != len(keys):
        return None
    if len(names) < 2:
        return None
    # The very processors SQLAlchemy's own execution applies (a column type's dialect
    # implementation's: SQLite's DATETIME text, JSON through the engine's serializer).
    by_name = getattr(compiled, "_bind_processors", None)
    if by_name is None:
        return None
    processors = tuple(
        (i, processor) for i, name in enumerate(names) if (processor := by_name.get(name))
    )
    pick = operator.itemgetter(*names)
    return compiled.string, pick, processors


def _processed(values: tuple[Any, ...], processors: Processors) -> tuple[Any, ...]:
    out = list(values)
    for i, process in processors:
        out[i] = process(out[i])
    return tuple(out)


@functools.cache
def _upsert_statement(dialect_name: str, table: Table) -> Executable:
    """:func:`upsert`'s statement, built once per table (scoring upserts seven tables per
    commit: building each statement and its cache key every time cost more than a third of
    the upserts' CPU)."""
    dialect = postgresql if dialect_name == "postgresql" else sqlite
    statement = dialect.insert(table)
    keys = [c.name for c in table.primary_key.columns]
    values = {c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys}
    upserted: Executable = statement.on_conflict_do_update(index_elements=keys, set_=values)
    return upserted


def load_checkpoints(conn: Connection, streams: Sequence[str]) -> dict[str, str]:
    """Each stream's last entry id read (``0-0``: nothing yet); creates the missing rows."""
    table = table_of(Checkpoint)
    found = dict(
        conn.execute(
            select(table.c.stream, table.c.last_id).where(table.c.projection == PROJECTION)
        ).all()
    )
    missing = [s for s in streams if s not in found]
    if missing:
        rows = [{"projection": PROJECTION, "stream": s, "last_id": "0-0"} for s in missing]
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)
        found.update(dict.fromkeys(missing, "0-0"))
    return {s: found[s] for s in streams}


class CheckpointMoved(Exception):
    """Another writer advanced a checkpoint first: roll back, reload, read again."""


def advance_checkpoints(conn: Connection, moves: Mapping[str, tuple[str, str]]) -> None:
    """Move each stream's checkpoint from ``old`` to ``new`` (compare and set), so that two
    projectors on one database never both count the same entries."""
    statement = _advance_statement()
    params = [{"b_stream": s, "b_old": old, "b_new": new} for s, (old, new) in moves.items()]
    if len(params) > 1 and conn.dialect.supports_sane_multi_rowcount:
        # One executemany: each stream's row is moved at most once (its primary key), so
        # every one moved exactly when the rows moved add up to the streams.
        if conn.execute(statement, params).rowcount != len(params):
            raise CheckpointMoved(", ".join(sorted(moves)))
        return
    for one in params:
        if conn.execute(statement, one).rowcount != 1:
            raise CheckpointMoved(one["b_stream"])


@functools.cache
def _advance_statement() -> Executable:
    """:func:`advance_checkpoints`' compare and set, built once (it runs per stream read)."""
    table = table_of(Checkpoint)
    return (
        update(table)
        .where(
            table.c.projection == PROJECTION,
            table.c.stream == bindparam("b_stream"),
            table.c.last_id == bindparam("b_old"),
        )
        .values(last_id=bindparam("b_new"))
    )
