"""The flat results table: one row per seat per finished game, every column a designer
filters or groups by, and each seat's facts, for the analytics API, the lab and exports.

Live games get their rows from the scoring projection (so ``caravel projections rebuild``
writes them again); ``caravel lab run`` writes rows of its own games under an experiment
name, which a rebuild keeps (it deletes only the rows with no experiment). The score
breakdown is one integer column per part (``score_<part>``), for the parts of every
registered game: a game's rows leave the other games' parts empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Table,
    delete,
    false,
    insert,
    select,
)
from sqlmodel import SQLModel

from shared.games import api
from shared.games.api import analytics

SCORE_PREFIX = "score_"
HOUR = "%Y-%m-%dT%H"


@cache
def caravel_version() -> str:
    """The installed Caravel's version (package metadata), or ``unknown``."""
    try:
        return metadata.version("caravel")
    except metadata.PackageNotFoundError:
        return "unknown"


def as_utc(moment: datetime | None) -> datetime | None:
    """A time in UTC (one without a zone is taken as UTC, as the tables hold): what a
    filter compares ``finished_at`` with. SQLite stores a time's UTC digits without an
    offset, and PostgreSQL reads a time without one in the session's zone."""
    if moment is None:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def score_columns() -> list[str]:
    """Every registered game's breakdown parts, each once, in the games' order."""
    parts = (p for name in api.names() for p in analytics.breakdown_parts(name))
    return list(dict.fromkeys(parts))


KEY_TYPES: dict[str, Any] = {
    "game": String(64),
    "ruleset": String(200),
    "ruleset_hash": String(32),
    "options": String(1000),
    "players": Integer(),
    "humans": Integer(),
    "seat_kind": String(32),
    "imported": Boolean(),
    "experiment": String(100),
    "finished_hour": String(13),  # YYYY-MM-DDTHH (UTC)
}
"""The types of the columns a filter names: the flat table's and the cells' (which sum it
by them, :mod:`.cells`) are made from this one definition, so they cannot drift apart."""


def key_column(name: str, **options: Any) -> Column[Any]:
    """A column of :data:`KEY_TYPES` (``options``: its key, nullability, defaults)."""
    return Column(name, KEY_TYPES[name], **options)


RESULTS = Table(
    "analytics_results",
    SQLModel.metadata,
    Column("game_id", String(64), primary_key=True),
    Column("seat", Integer, primary_key=True),
    *(key_column(k, nullable=False) for k in ("game", "ruleset")),
    key_column("ruleset_hash", nullable=False, index=True),
    *(key_column(k, nullable=False) for k in ("options", "players", "humans")),
    Column("turn_position", Integer, nullable=False),
    key_column("seat_kind", nullable=False),
    Column("player", String(100), nullable=False),
    Column("side", String(64), nullable=False),
    Column("place", Integer, nullable=False),
    Column("won", Boolean, nullable=False),
    Column("total", Integer, nullable=False),
    *(Column(f"{SCORE_PREFIX}{part}", Integer, nullable=True) for part in score_columns()),
    Column("decisions", Integer, nullable=False),
    Column("duration_s", Float, nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    key_column("finished_hour", nullable=False),  # the cells' hour of finished_at
    Column("caravel_version", String(32), nullable=False),
    key_column("experiment", nullable=True),
    # loaded by `caravel games import` (played elsewhere): the analytics filter `imported`
    key_column("imported", nullable=False, server_default=false()),
    Index("ix_analytics_results_game_finished", "game", "finished_at"),
    Index("ix_analytics_results_experiment", "experiment", "game"),
)

SEAT_FACTS = Table(
    "analytics_seat_facts",
    SQLModel.metadata,
    Column("game_id", String(64), primary_key=True),
    Column("seat", Integer, primary_key=True),
    Column("kind", String(32), primary_key=True),
    Column("subject", String(64), primary_key=True),
    Column("count", Integer, nullable=False),
    Column("value", Integer, nullable=False),  # the sum of the facts' values
    # the game's, as in its results (an export filters and partitions facts without a join)
    Column("game", String(64), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("finished_hour", String(13), nullable=False),
    Column("experiment", String(100), nullable=True, index=True),
)

EXPERIMENTS = Table(
    "analytics_experiments",
    SQLModel.metadata,
    Column("name", String(100), primary_key=True),
    Column("game", String(64), nullable=False),
    Column("ruleset", String(200), nullable=False),
    Column("ruleset_hash", String(32), nullable=False),
    Column("options", String(1000), nullable=False),
    Column("seats", String(500), nullable=False),
    Column("games_planned", Integer, nullable=False),
    Column("games_recorded", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # running, complete, incomplete
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("caravel_version", String(32), nullable=False),
)

KEPT = [RESULTS, SEAT_FACTS, EXPERIMENTS]
"""Tables a rebuild does not drop: they hold the lab's rows beside the projected ones."""


def experiment_row(
    *,
    name: str,
    game: str,
    ruleset: str,
    ruleset_hash: str,
    options: Mapping[str, Any],
    levels: Sequence[str],
    planned: int,
    started_at: datetime,
) -> dict[str, Any]:
    """An experiment's row as a run starts it (``running``, nothing recorded). ``options``
    as its games' ``game_created`` has them (every option, typed): the key its flat rows
    carry, so the experiment's row names what a filter on them matches."""
    return {
        "name": name,
        "game": game,
        "ruleset": ruleset,
        "ruleset_hash": ruleset_hash,
        "options": analytics.options_key(options),
        "seats": ",".join(levels),
        "games_planned": planned,
        "games_recorded": 0,
        "status": "running",
        "started_at": started_at,
        "finished_at": None,
        "caravel_version": caravel_version(),
    }


def restore_experiments(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert those of ``rows`` whose experiment SQL holds no row of (a database lost, then
    rebuilt): a row SQL holds stays as its run left it (its own start, end and status)."""
    if not rows:
        return
    names = sorted(r["name"] for r in rows)
    held = set(
        conn.execute(select(EXPERIMENTS.c.name).where(EXPERIMENTS.c.name.in_(names))).scalars()
    )
    if missing := [dict(r) for r in rows if r["name"] not in held]:
        conn.execute(insert(EXPERIMENTS), missing)


def delete_projected(conn: Connection) -> None:
    """Delete the rows the projection wrote (no experiment): a rebuild writes them again."""
    conn.execute(delete(RESULTS).where(RESULTS.c.experiment.is_(None)))
    conn.execute(delete(SEAT_FACTS).where(SEAT_FACTS.c.experiment.is_(None)))


def result_rows(
    *,
    game: api.AnyGame,
    game_id: str,
    ruleset: str,
    ruleset_hash: str,
    options: Mapping[str, Any],
    seat_kinds: Sequence[str],
    players: Sequence[str],
    positions: Sequence[int],
    results: Sequence[api.SeatResult],
    decisions: int,
    duration_s: float | None,
    finished_at: datetime,
    experiment: str | None,
    imported: bool = False,
) -> list[dict[str, Any]]:
    """The flat rows of one finished game, one per seat."""
    humans = sum(1 for kind in seat_kinds if kind == "human")
    common = {
        "game_id": game_id,
        "game": game.name,
        "ruleset": ruleset,
        "ruleset_hash": ruleset_hash,
        "options": analytics.options_key(options),
        "players": len(results),
        "humans": humans,
        "decisions": decisions,
        "duration_s": duration_s,
        "finished_at": finished_at,
        "finished_hour": finished_at.astimezone(UTC).strftime(HOUR),
        "caravel_version": caravel_version(),
        "experiment": experiment,
        "imported": imported,
        **{f"{SCORE_PREFIX}{part}": None for part in score_columns()},
    }
    return [
        {
            **common,
            "seat": r.seat,
            "turn_position": positions[r.seat],
            "seat_kind": seat_kinds[r.seat],
            "player": players[r.seat],
            "side": r.side,
            "place": r.place,
            "won": r.place == 1,
            "total": r.total,
            **{f"{SCORE_PREFIX}{part}": value for part, value in r.breakdown.items()},
        }
        for r in results
    ]


SeatFacts = dict[tuple[int, str, str], list[int]]
"""Per (seat, kind, subject): how many such facts and the sum of their values."""


def count_facts(into: SeatFacts, facts: Sequence[api.Fact]) -> None:
    """Add a batch of facts to a game's per-seat counts."""
    for fact in facts:
        held = into.setdefault((fact.seat, fact.kind, fact.subject), [0, 0])
        held[0] += 1
        held[1] += fact.value


def fact_rows(results: Sequence[Mapping[str, Any]], facts: SeatFacts) -> list[dict[str, Any]]:
    """The seat-fact rows of one finished game, beside its flat ``results`` rows."""
    game = results[0]
    return [
        {
            "game_id": game["game_id"],
            "seat": seat,
            "kind": kind,
            "subject": subject,
            "count": count,
            "value": value,
            "game": game["game"],
            "finished_at": game["finished_at"],
            "finished_hour": game["finished_hour"],
            "experiment": game["experiment"],
        }
        for (seat, kind, subject), (count, value) in sorted(facts.items())
    ]
