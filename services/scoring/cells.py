"""The analytics cube: the flat results table summed by every filter's columns, per hour.

A cell holds, for one combination of the columns a filter names (game, ruleset and its
hash, options, players, humans, seat kind, experiment) and one hour of finish times, the
sums every figure is made of: per dimension value (a turn position, a side, a seat kind, a
player count, a breakdown column, a fact) the seats counted, their wins, and a measure's
sum and sum of squares. Any filter whose period falls on whole hours is then answered by
one grouped read of a few thousand cells, however many games there are
(:func:`.stats.figures` reads the flat table itself for other periods).

Cells are derived, never edited: a group (game, experiment, hour) is deleted and summed
again from the flat table whenever rows of its games are written (the projection, per
batch; the lab every few seconds while it plays and at the end; a rebuild at the end), so
they always equal a sum of the rows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    Connection,
    Delete,
    Insert,
    Integer,
    Select,
    String,
    Table,
    and_,
    bindparam,
    cast,
    delete,
    false,
    func,
    insert,
    literal,
    or_,
    select,
)
from sqlmodel import SQLModel

from shared.games.api import analytics

from .flat import RESULTS, SCORE_PREFIX, SEAT_FACTS, score_columns

KEYS = (
    "game",
    "ruleset",
    "ruleset_hash",
    "options",
    "players",
    "humans",
    "seat_kind",
    "imported",
    "experiment",
    "finished_hour",
)
NO_EXPERIMENT = ""  # a projected game's experiment in the cells (the flat table: NULL)

CELLS = Table(
    "analytics_cells",
    SQLModel.metadata,
    Column("game", String(64), primary_key=True),
    Column("ruleset", String(200), primary_key=True),
    Column("ruleset_hash", String(32), primary_key=True),
    Column("options", String(1000), primary_key=True),
    Column("players", Integer, primary_key=True),
    Column("humans", Integer, primary_key=True),
    Column("seat_kind", String(32), primary_key=True),
    Column("imported", Boolean, primary_key=True, server_default=false()),
    Column("experiment", String(100), primary_key=True),
    Column("finished_hour", String(13), primary_key=True),  # YYYY-MM-DDTHH, UTC
    Column("dim", String(16), primary_key=True),
    Column("value", String(200), primary_key=True),
    Column("n", Integer, nullable=False),
    Column("wins", Integer, nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("squares", BigInteger, nullable=False),
)

Group = tuple[str, str, str]
"""(game, experiment or "", finished hour): what is summed again at once."""


def _key_columns() -> list[Any]:
    c = RESULTS.c
    return [
        *(c[k] for k in KEYS if k != "experiment" and k != "finished_hour"),
        func.coalesce(c.experiment, NO_EXPERIMENT),
        c.finished_hour,
    ]


def _won() -> Any:
    return func.sum(cast(RESULTS.c.won, Integer))


def _seat_dims() -> list[tuple[str, Any]]:
    c = RESULTS.c
    return [
        ("position", cast(c.turn_position, String)),
        ("side", c.side),
        ("kind", c.seat_kind),
        ("players", cast(c.players, String)),
    ]


def _mean_columns(game: str | None) -> list[str]:
    parts = analytics.breakdown_parts(game) if game is not None else tuple(score_columns())
    return ["total", *(f"{SCORE_PREFIX}{p}" for p in parts), "decisions"]


def selects(where: ColumnElement[bool], head: list[Any], game: str | None) -> list[Select[Any]]:
    """Statements summing the flat rows that match ``where``, grouped by the ``head``
    columns: each yields the head columns, dim, value, n, wins, total, squares. ``game``:
    only its breakdown columns (None: every game's)."""
    out: list[Select[Any]] = []
    zero = literal(0, BigInteger)
    for dim, value in _seat_dims():
        columns = [*head, literal(dim, String), value, func.count(), _won(), zero, zero]
        out.append(select(*columns).where(where).group_by(*head, value))
    for name in _mean_columns(game):
        measure = cast(RESULTS.c[name], BigInteger)
        label = literal(name.removeprefix(SCORE_PREFIX), String)
        columns = [
            *head,
            literal("mean", String),
            label,
            func.count(measure),
            _won(),
            func.coalesce(func.sum(measure), 0),
            func.coalesce(func.sum(measure * measure), 0),
        ]
        query = select(*columns).where(where)
        query = query.group_by(*head).having(func.count(measure) > 0)
        out.append(query)
    f = SEAT_FACTS.c
    fact = f.kind + literal("/", String) + f.subject
    joined = (f.game_id == RESULTS.c.game_id) & (f.seat == RESULTS.c.seat)
    columns = [*head, literal("fact", String), fact, func.count(), _won(), zero, zero]
    out.append(
        select(*columns)
        .select_from(SEAT_FACTS.join(RESULTS, joined))
        .where(where)
        .group_by(*head, f.kind, f.subject)
    )
    return out


REFRESH_CHUNK = 50  # groups summed again per statement


def refresh(conn: Connection, groups: Iterable[Group]) -> None:
    """Sum ``groups`` again from the flat table (their old cells deleted first)."""
    ordered = sorted(set(groups))
    for i in range(0, len(ordered), REFRESH_CHUNK):
        chunk = ordered[i : i + REFRESH_CHUNK]
        remove, inserts = _refresh_statements(len(chunk))
        params = {
            f"{k}{n}": v for n, group in enumerate(chunk) for k, v in zip("geh", group, strict=True)
        }
        conn.execute(remove, params)
        for statement in inserts:
            conn.execute(statement, params)


@functools.cache
def _refresh_statements(size: int) -> tuple[Delete, list[Insert]]:
    """The statements that sum ``size`` groups again, their groups bound at execution
    (``g<n>``, ``e<n>``, ``h<n>``): built once per size. Scoring sums the groups of the
    games that finished in each batch it commits, and building the dozen statements each
    time (and their cache keys) was half of that work (~5% of the pipeline's CPU in the
    peers benchmark)."""
    marks: list[tuple[Any, ...]] = [tuple(bindparam(f"{k}{n}") for k in "geh") for n in range(size)]
    c = RESULTS.c
    experiment = func.coalesce(c.experiment, NO_EXPERIMENT)
    rows = or_(*(and_(c.game == g, experiment == e, c.finished_hour == h) for g, e, h in marks))
    stored = CELLS.c
    cells = or_(
        *(
            and_(stored.game == g, stored.experiment == e, stored.finished_hour == h)
            for g, e, h in marks
        )
    )
    names = [*KEYS, "dim", "value", "n", "wins", "total", "squares"]
    inserts = [
        insert(CELLS).from_select(names, query) for query in selects(rows, _key_columns(), None)
    ]
    return delete(CELLS).where(cells), inserts


def groups_of(rows: Iterable[dict[str, Any]]) -> set[Group]:
    """The groups flat rows fall in."""
    return {(r["game"], r["experiment"] or NO_EXPERIMENT, r["finished_hour"]) for r in rows}


def stored_groups(conn: Connection, game_ids: Sequence[str]) -> set[Group]:
    """The groups of the flat rows held for ``game_ids`` (before they are replaced)."""
    if not game_ids:
        return set()
    c = RESULTS.c
    query = (
        select(c.game, func.coalesce(c.experiment, NO_EXPERIMENT), c.finished_hour)
        .where(c.game_id.in_(sorted(game_ids)))
        .distinct()
    )
    return {(g, e, h) for g, e, h in conn.execute(query)}


def refresh_all(conn: Connection, experiment: str | None = None) -> None:
    """Sum every group again (of one experiment, or of the projected games: ``None``)."""
    c = RESULTS.c
    wanted = c.experiment.is_(None) if experiment is None else c.experiment == experiment
    query = select(c.game, func.coalesce(c.experiment, NO_EXPERIMENT), c.finished_hour)
    found = {(g, e, h) for g, e, h in conn.execute(query.where(wanted).distinct())}
    refresh(conn, found)


def delete_projected(conn: Connection) -> None:
    conn.execute(delete(CELLS).where(CELLS.c.experiment == NO_EXPERIMENT))
