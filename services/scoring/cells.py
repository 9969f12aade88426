"""The analytics cube: the flat results table summed by every filter's columns, per hour,
per minute and per second.

A cell holds, for one combination of the columns a filter names (game, ruleset and its
hash, options, players, humans, seat kind, experiment) and one span of finish times, the
sums every figure is made of: per dimension value (a turn position, a side, a seat kind, a
player count, a breakdown column, a fact) the seats counted, their wins, and a measure's
sum and sum of squares. Three levels of span: hours (:data:`CELLS`), minutes and seconds
(:data:`FINE`, by ``grain``). :func:`.stats.sums` answers a period's whole hours from the
hourly cells, the whole minutes and seconds left at its ends from the finer ones, and only
what is left under a second at each end from the flat table (or the second's cells less
its other part, whichever reads fewer games): a period whatever its ends costs a few
grouped reads of cells and at most half of two seconds' games, instead of a scan of the
hours its ends fall in (2-3 s over 100,000 lab games finished within one hour).

Cells are derived, never edited: a group (game, experiment, second) is deleted and summed
again from the flat table whenever rows of its games are written (the projection, per
batch; the lab every few seconds while it plays and at the end; a rebuild at the end), and
the minutes and hours it falls in are then summed again from the finer cells (seconds into
minutes, minutes into hours), so every level always equals a sum of the rows (their rows
and write cost: benchmarks/README.md, "Analytics periods").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
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
    literal_column,
    select,
    union_all,
)
from sqlmodel import SQLModel

from shared.games.api import analytics

from .flat import RESULTS, SCORE_PREFIX, SEAT_FACTS, as_utc, key_column, score_columns

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


def _sum_columns() -> list[Column[Any]]:
    """A cell's dimension, its value and the sums (each table its own columns)."""
    return [
        Column("dim", String(16), primary_key=True),
        Column("value", String(200), primary_key=True),
        Column("n", Integer, nullable=False),
        Column("wins", Integer, nullable=False),
        Column("total", BigInteger, nullable=False),
        Column("squares", BigInteger, nullable=False),
    ]


CELLS = Table(
    "analytics_cells",
    SQLModel.metadata,
    *(key_column(k, primary_key=True) for k in KEYS[: KEYS.index("imported")]),
    key_column("imported", primary_key=True, server_default=false()),
    *(key_column(k, primary_key=True) for k in ("experiment", "finished_hour")),
    *_sum_columns(),
)

FINE = Table(
    "analytics_fine_cells",
    SQLModel.metadata,
    key_column("game", primary_key=True),
    Column("grain", String(8), primary_key=True),  # minute or second
    Column("start", String(19), primary_key=True),  # YYYY-MM-DDTHH:MM[:SS], UTC
    key_column("experiment", primary_key=True),
    *(key_column(k, primary_key=True) for k in KEYS[1 : KEYS.index("experiment")]),
    *_sum_columns(),
)
"""The finer cells: the same sums per minute and per second of finish times (``grain``),
keyed by the minute's or second's start (game, grain and start first: a period's ends
are read by that prefix)."""

SECOND = "%Y-%m-%dT%H:%M:%S"
GRAINS = (("minute", 16), ("second", 19))
"""The finer grains and the length of their start (a second's start cut to 16 characters
is its minute's, to 13 its hour's: the hourly cells' ``finished_hour``)."""
FILTER_KEYS = [k for k in KEYS if k != "finished_hour"]
SUMS = ["dim", "value", "n", "wins", "total", "squares"]

Group = tuple[str, str, str]
"""(game, experiment or "", finished second YYYY-MM-DDTHH:MM:SS): what is summed again at
once from the flat table (its minute and hour are then summed again from the finer cells)."""


def second_of(conn: Connection, moment: Any) -> Any:
    """The SQL of a finish time's second (``YYYY-MM-DDTHH:MM:SS``, UTC, cut not rounded)."""
    if conn.dialect.name == "postgresql":  # constants, not parameters: it is grouped by
        utc = func.timezone(literal_column("'UTC'"), moment)
        return func.to_char(utc, literal_column("'YYYY-MM-DD\"T\"HH24:MI:SS'"))
    return func.strftime(literal_column(f"'{SECOND}'"), moment)


def _key_columns(conn: Connection) -> list[Any]:
    c = RESULTS.c
    return [
        *(c[k] for k in FILTER_KEYS if k != "experiment"),
        func.coalesce(c.experiment, NO_EXPERIMENT),
        second_of(conn, c.finished_at),
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


def _roll_up(conn: Connection, where: ColumnElement[bool], grain: str | None) -> None:
    """Sum finer cells matching ``where`` into the cells of ``grain`` (None: the hourly
    cells): seconds into minutes, minutes into hours."""
    conn.execute(_roll_up_statement(where, grain))


def _roll_up_statement(where: ColumnElement[bool], grain: str | None) -> Any:
    """The statement of :func:`_roll_up`."""
    f = FINE.c
    length = 16 if grain == "minute" else 13
    start = func.substr(f.start, 1, length)
    keys = [f[k] for k in FILTER_KEYS]
    sums = [func.sum(f[k]) for k in ("n", "wins", "total", "squares")]
    query = (
        select(*keys, start, f.dim, f.value, *sums)
        .where(where)
        .group_by(*keys, start, f.dim, f.value)
    )
    if grain is None:
        return insert(CELLS).from_select([*KEYS, *SUMS], query)
    query = query.add_columns(literal(grain, String))
    return insert(FINE).from_select([*FILTER_KEYS, "start", *SUMS, "grain"], query)


class _Refresh(NamedTuple):
    """The statements of :func:`refresh` for one dialect, built once and bound per group:
    building the ~20 statements of a refresh (a select per dimension, deletes, roll-ups)
    and their cache keys on every projected batch was about 5% of the pipeline's CPU under
    the peers benchmark. Each runs as one ``executemany`` over the groups it is bound to."""

    seconds_delete: Any
    seconds_insert: Any
    minutes_delete: Any
    minutes_insert: Any
    hours_delete: Any
    hours_insert: Any


_REFRESH: dict[str, _Refresh] = {}


def _refresh_statements(conn: Connection) -> _Refresh:
    """The refresh's statements for ``conn``'s dialect (a finish time's second is written
    in each dialect's SQL)."""
    dialect = conn.dialect.name
    if (made := _REFRESH.get(dialect)) is None:
        made = _REFRESH[dialect] = _made_refresh(conn)
    return made


def _made_refresh(conn: Connection) -> _Refresh:
    f, c = FINE.c, RESULTS.c
    game: Any = bindparam("g")
    experiment: Any = bindparam("e")
    start: Any = bindparam("s")
    in_second = and_(
        c.game == game,
        c.finished_at >= bindparam("begin"),
        c.finished_at < bindparam("end"),
        func.coalesce(c.experiment, NO_EXPERIMENT) == experiment,
    )
    names = [*FILTER_KEYS, "start", *SUMS, "grain"]
    seconds = [
        q.add_columns(literal("second")) for q in selects(in_second, _key_columns(conn), None)
    ]

    def fine_of(grain: str) -> Any:
        return delete(FINE).where(
            f.game == game, f.experiment == experiment, f.start == start, f.grain == grain
        )

    def finer(length: int, grain: str) -> Any:
        held = func.substr(f.start, 1, length) == start
        return (f.game == game) & (f.experiment == experiment) & held & (f.grain == grain)

    hour_cells = delete(CELLS).where(
        CELLS.c.game == game, CELLS.c.experiment == experiment, CELLS.c.finished_hour == start
    )
    return _Refresh(
        seconds_delete=fine_of("second"),
        seconds_insert=insert(FINE).from_select(names, union_all(*seconds)),
        minutes_delete=fine_of("minute"),
        minutes_insert=_roll_up_statement(finer(16, "second"), "minute"),
        hours_delete=hour_cells,
        hours_insert=_roll_up_statement(finer(13, "minute"), None),
    )


def refresh(conn: Connection, groups: Iterable[Group]) -> None:
    """Sum ``groups`` again from the flat table (their old cells deleted first), then the
    minutes and hours they fall in from the finer cells."""
    made = _refresh_statements(conn)
    seconds = sorted(set(groups))
    if not seconds:
        return
    bound = []
    for g, e, second in seconds:
        begin = datetime.strptime(second, SECOND).replace(tzinfo=UTC)
        bound.append(
            {"g": g, "e": e, "s": second, "begin": begin, "end": begin + timedelta(seconds=1)}
        )
    conn.execute(made.seconds_delete, bound)
    conn.execute(made.seconds_insert, bound)
    for length, remove, insert_ in (
        (16, made.minutes_delete, made.minutes_insert),
        (13, made.hours_delete, made.hours_insert),
    ):
        spans = [
            {"g": g, "e": e, "s": s}
            for g, e, s in sorted({(g, e, s[:length]) for g, e, s in seconds})
        ]
        conn.execute(remove, spans)
        conn.execute(insert_, spans)


def groups_of(rows: Iterable[dict[str, Any]]) -> set[Group]:
    """The groups flat rows fall in."""
    out = set()
    for r in rows:
        second = as_utc(r["finished_at"])
        assert second is not None
        out.add((r["game"], r["experiment"] or NO_EXPERIMENT, second.strftime(SECOND)))
    return out


def stored_groups(conn: Connection, game_ids: Sequence[str]) -> set[Group]:
    """The groups of the flat rows held for ``game_ids`` (before they are replaced)."""
    if not game_ids:
        return set()
    c = RESULTS.c
    query = (
        select(c.game, func.coalesce(c.experiment, NO_EXPERIMENT), second_of(conn, c.finished_at))
        .where(c.game_id.in_(sorted(game_ids)))
        .distinct()
    )
    return {(g, e, s) for g, e, s in conn.execute(query)}


def refresh_all(conn: Connection, experiment: str | None = None) -> None:
    """Sum every cell again (of one experiment, or of the projected games: ``None``): all
    its seconds from the flat table at once, then its minutes and hours from them."""
    c = RESULTS.c
    wanted = c.experiment.is_(None) if experiment is None else c.experiment == experiment
    name = NO_EXPERIMENT if experiment is None else experiment
    conn.execute(delete(FINE).where(FINE.c.experiment == name))
    conn.execute(delete(CELLS).where(CELLS.c.experiment == name))
    names = [*FILTER_KEYS, "start", *SUMS, "grain"]
    for query in selects(wanted, _key_columns(conn), None):
        conn.execute(insert(FINE).from_select(names, query.add_columns(literal("second"))))
    mine = FINE.c.experiment == name
    _roll_up(conn, mine & (FINE.c.grain == "second"), "minute")
    _roll_up(conn, mine & (FINE.c.grain == "minute"), None)


def delete_projected(conn: Connection) -> None:
    conn.execute(delete(CELLS).where(CELLS.c.experiment == NO_EXPERIMENT))
    conn.execute(delete(FINE).where(FINE.c.experiment == NO_EXPERIMENT))
