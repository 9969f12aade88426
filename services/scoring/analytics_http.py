"""The analytics API: figures with their n and 95% intervals under filters, A/B
comparisons, the filters' allowed values, the games' labels and exports of the flat table.

Every filter is checked (:func:`.stats.check`): a value the data cannot answer is 422
``bad_filter`` with ``details.field`` and ``details.allowed``; nothing is silently ignored.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Response
from pydantic import BeforeValidator
from sqlalchemy import Connection, func, select

from shared.games import api
from shared.games.api import analytics
from shared.httpapi import ERRORS, ApiError, Db, game_named

from . import stats
from .cells import CELLS

router = APIRouter(tags=["analytics"])

Game = Annotated[
    str,
    Query(description="The game's registry name.", json_schema_extra={"enum": api.names()}),
]
Ruleset = Annotated[
    str | None, Query(description="A ruleset name, or the 16-hex content hash of one.")
]
Options = Annotated[
    list[str] | None, Query(description="Edition options as KEY=VALUE (repeatable).")
]
Players = Annotated[int | None, Query(description="Player count.")]
SeatKind = Annotated[str | None, Query(description="Only seats of this kind: human, bot:<level>.")]
Seats = Annotated[
    str | None, Query(description="humans: games of humans only; bots: games of bots only.")
]


def _iso(value: Any) -> Any:
    """An ISO 8601 text only (pydantic would also take a number as a Unix time, which the
    documented ``date-time`` format does not allow), in UTC: PostgreSQL refuses offsets
    past ±15:59, which ISO 8601 allows."""
    if not isinstance(value, str):
        return value
    moment = datetime.fromisoformat(value)
    try:
        return moment.astimezone(UTC) if moment.tzinfo else moment
    except OverflowError:
        raise ValueError(f"{value!r} is out of range in UTC") from None


Since = Annotated[
    datetime | None,
    BeforeValidator(_iso),
    Query(description="Finished at or after (ISO 8601)."),
]
Until = Annotated[
    datetime | None, BeforeValidator(_iso), Query(description="Finished before (ISO 8601).")
]
Experiment = Annotated[str | None, Query(description="A lab experiment's name.")]
Imported = Annotated[
    str,
    Query(
        description="Games loaded by `caravel games import`: exclude (the default: played "
        "elsewhere), include, or only them."
    ),
]


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ApiError(
                422, "bad_filter", f"expected KEY=VALUE, got {pair!r}", {"field": "option"}
            )
        out[key.strip()] = value.strip()
    return out


def checked(conn: Connection, f: stats.Filter) -> stats.Filter:
    """The filter checked, or 422 ``bad_filter`` naming the field and its allowed values."""
    try:
        return stats.check(conn, f)
    except stats.BadFilter as e:
        details = {"field": e.field, "allowed": e.allowed}
        raise ApiError(422, "bad_filter", str(e), details) from None


def filter_of(
    game: str,
    ruleset: str | None = None,
    option: list[str] | None = None,
    players: int | None = None,
    seat_kind: str | None = None,
    seats: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    experiment: str | None = None,
    imported: str | None = None,
) -> stats.Filter:
    return stats.Filter(
        game=game,
        ruleset=ruleset or None,
        options=parse_options(option),
        players=players,
        seat_kind=seat_kind or None,
        seats=seats or None,
        since=since,
        until=until,
        experiment=experiment or None,
        imported=imported or stats.IMPORTED[0],
    )


@router.get("/analytics/figures", responses=ERRORS)
def figures(
    db: Db,
    game: Game = api.DEFAULT_GAME,
    ruleset: Ruleset = None,
    option: Options = None,
    players: Players = None,
    seat_kind: SeatKind = None,
    seats: Seats = None,
    since: Since = None,
    until: Until = None,
    experiment: Experiment = None,
    imported: Imported = stats.IMPORTED[0],
) -> dict[str, Any]:
    """Every figure under one filter: games and seats counted, the overall win rate, win
    rates by turn position, side, seat kind and player count against the fair share (1/n,
    with a Bonferroni-corrected test flagging a significant imbalance), breakdown means and
    fact lifts (owners' win rate against the other seats'). Every rate has ``n``, ``low``
    and ``high`` (95% Wilson), every mean ``n``, ``low`` and ``high``."""
    f = filter_of(
        game, ruleset, option, players, seat_kind, seats, since, until, experiment, imported
    )
    with db.connect() as conn:
        return stats.figures(conn, checked(conn, f))


def _filter_text(text: str, name: str) -> stats.Filter:
    """A filter given as a query string (``game=navegador&experiment=x``)."""
    raw = parse_qs(text, keep_blank_values=False)
    known = {"game", "ruleset", "option", "players", "seat_kind", "seats", "since", "until"}
    known |= {"experiment", "imported"}
    if unknown := sorted(set(raw) - known):
        raise ApiError(
            422,
            "bad_filter",
            f"{name}: unknown filters {unknown}",
            {"field": name, "allowed": sorted(known)},
        )
    one = {k: v[-1] for k, v in raw.items() if k != "option"}
    try:
        players = int(one["players"]) if "players" in one else None
        since = _iso(one["since"]) if "since" in one else None
        until = _iso(one["until"]) if "until" in one else None
    except ValueError as e:
        raise ApiError(422, "bad_filter", f"{name}: {e}", {"field": name}) from None
    return filter_of(
        one.get("game", api.DEFAULT_GAME),
        one.get("ruleset"),
        raw.get("option"),
        players,
        one.get("seat_kind"),
        one.get("seats"),
        since,
        until,
        one.get("experiment"),
        one.get("imported"),
    )


@router.get("/analytics/compare", responses=ERRORS)
def compare(
    db: Db,
    a: Annotated[str, Query(description="Filter A as a query string: game=G&experiment=X")],
    b: Annotated[str, Query(description="Filter B, as A.")],
) -> dict[str, Any]:
    """A/B: every figure of two filters with A - B and its 95% interval (Newcombe for
    rates, Welch for means) and p-value; ``significant`` after a Holm-Bonferroni
    correction over every difference compared (``correction`` says which and how many)."""
    with db.connect() as conn:
        first = stats.figures(conn, checked(conn, _filter_text(a, "a")))
        second = stats.figures(conn, checked(conn, _filter_text(b, "b")))
    return stats.compare(first, second)


@router.get("/analytics/filters", responses=ERRORS)
def filters(db: Db, game: Game = api.DEFAULT_GAME) -> dict[str, Any]:
    """What a filter of ``game`` may name: rulesets (and the content hashes seen), options
    and their values, player counts, seat kinds, experiments, and the period the data
    spans."""
    played = game_named(game)
    schema = played.options_model(played.default_ruleset).model_json_schema()
    with db.connect() as conn:
        c = CELLS.c  # the cells: a few rows per hour, not one per seat
        hashes = conn.execute(
            select(c.ruleset, c.ruleset_hash).where(c.game == game).distinct()
        ).all()
        span = conn.execute(
            select(func.min(c.finished_hour), func.max(c.finished_hour)).where(c.game == game)
        ).one()
        known = stats.experiments(conn, game)
    return {
        "game": game,
        "rulesets": played.rulesets(),
        "ruleset_hashes": [{"ruleset": r, "hash": h} for r, h in hashes],
        "options": {
            key: prop.get("enum") or [prop.get("const")]
            for key, prop in schema.get("properties", {}).items()
        },
        "players": list(range(played.min_players, played.max_players + 1)),
        "seat_kinds": stats.seat_kinds(played),
        "seats": list(stats.SEAT_MIXES),
        "imported": list(stats.IMPORTED),
        "experiments": [
            {
                **{k: v for k, v in e.items() if not isinstance(v, datetime)},
                "started_at": e["started_at"].isoformat(),
            }
            for e in known
        ],
        "period": [f"{hour}:00:00+00:00" if hour else None for hour in span],  # whole hours
    }


@router.get("/analytics/labels", responses=ERRORS)
def labels(game: Game = api.DEFAULT_GAME) -> dict[str, Any]:
    """The game's readable names of the ids its figures use (sides, breakdown columns,
    facts, fact subjects, options, option values), by namespace; ``title`` the game's."""
    played = game_named(game)
    return {"game": game, "title": played.title, **analytics.labels(played)}


@router.get(
    "/analytics/export",
    responses={
        **ERRORS,
        200: {"content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}}},
    },
    response_class=Response,
)
def export_table(
    db: Db,
    format: Annotated[str, Query(description="parquet or csv.")] = "parquet",
    game: Annotated[str | None, Query(description="Only this game.")] = None,
    since: Since = None,
    until: Until = None,
    experiment: Experiment = None,
) -> Response:
    """The flat results table and the seat facts as one zip: Parquet datasets partitioned
    by game and month (``results/game=…/month=…/``, ``facts/…``) or two CSV files. No
    secret: results and facts only."""
    from .export import FORMATS, Scope, zipped

    if format not in FORMATS:
        details = {"field": "format", "allowed": list(FORMATS)}
        raise ApiError(422, "bad_filter", f"unknown format {format!r}", details)
    if game is not None:
        game_named(game)
    scope = Scope(game, since, until, experiment or None)
    with tempfile.TemporaryDirectory() as folder:
        body = zipped(db, scope, format, Path(folder))
    name = f"caravel-analytics-{format}.zip"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return Response(body, media_type="application/zip", headers=headers)
