"""Scoring over HTTP: standings, results, leaderboards, analytics and a dashboard page.

The composition root (services/server.py) puts this router beside the lobby's; it reads SQL
through the app's engine (``shared.httpapi.Db``). Everything is read from the scoring tables;
nothing here replays a log. Every game scores in its own terms, so a score is a total with the
game's breakdown of it as an object, ratings are per game, and the analytics summary has a
section per game, with the game's facts (its ``facts`` hook) counted by kind and subject. The
analytics page (``/analytics``) is drawn in the browser from the analytics API
(:mod:`.analytics_http`): no external scripts, no network.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from sqlalchemy import Connection, Integer, cast, func, select

from shared.games import api
from shared.httpapi import ERRORS, ApiError, Db, Id, game_named

from .analytics_http import router as analytics_router
from .db import Decision, FactRow, Rating, Result, ScoredGame, Standing, table_of

PAGE = Path(__file__).parent / "pages" / "analytics.html"
router = APIRouter(tags=["scoring"])
router.include_router(analytics_router)
BREAKDOWN_EXAMPLE = {"colonies": 14, "discoveries": 9, "buildings": 12, "economy": 6}


class StandingOut(BaseModel):
    seat: int
    player: str
    breakdown: dict[str, int] = Field(
        description="The parts of the total, named and ordered by the game.",
        examples=[BREAKDOWN_EXAMPLE],
    )
    total: int
    place: int


class StandingsOut(BaseModel):
    game_id: str
    game: str = Field(examples=[api.DEFAULT_GAME])
    version: int = Field(description="The game's version these standings are at.")
    status: str = Field(examples=["running", "finished"])
    standings: list[StandingOut]


class ResultRow(StandingOut):
    seat_kind: str = Field(examples=["human", "bot:greedy"])
    side: str = Field(description="What the seat played (a nation, a colour).")
    won: bool
    tiebreak: list[int] = Field(description="The keys that ordered equal totals.")
    facts: dict[str, int] = Field(
        description="The seat's analytics facts, counted by kind.",
        examples=[{"building_bought": 3, "discovery": 2}],
    )


class ResultOut(BaseModel):
    game_id: str
    game: str = Field(examples=[api.DEFAULT_GAME])
    finished_at: str
    duration_s: float
    winners: list[int]
    results: list[ResultRow]


class LeaderOut(BaseModel):
    rank: int
    player: str = Field(examples=["bot:greedy", "player:Ana"])
    ordinal: float = Field(description="mu - 3 sigma: the conservative skill estimate.")
    mu: float
    sigma: float
    games: int
    wins: int


class FactStat(BaseModel):
    subject: str = Field(examples=["harbour"])
    count: int
    mean_value: float
    owner_win_rate: float = Field(description="Share of these facts whose seat won.")


class GameSummaryOut(BaseModel):
    games_finished: int
    games_running: int
    mean_decisions_per_game: float
    mean_duration_s: float
    games_per_hour: list[tuple[str, int]]
    win_rate_by_side: dict[str, float]
    win_rate_by_seat_kind: dict[str, float]
    mean_breakdown: dict[str, float]
    facts: dict[str, list[FactStat]] = Field(
        description="Per fact kind, over finished games: most frequent subject first."
    )
    decisions: dict[str, dict[str, float]] = Field(description="Per seat kind: count, latency.")


class SummaryOut(BaseModel):
    games: dict[str, GameSummaryOut] = Field(
        description="A section per game that scoring has seen, by the game's registry name."
    )


@router.get("/games/{game_id}/standings", response_model=StandingsOut, responses=ERRORS)
def standings(game_id: Id, db: Db) -> StandingsOut:
    """The live score of every seat (places with the game's tie-breakers), at the version of
    the game's row: scoring writes a seat's row only when its score changes, in the
    transaction of the game's row. One statement, so one snapshot of both on any database
    (PostgreSQL's read committed gives each statement its own)."""
    games, table = table_of(ScoredGame), table_of(Standing)
    query = (
        select(
            games.c.game,
            games.c.version,
            games.c.status,
            *(table.c[name] for name in StandingOut.model_fields),
        )
        .select_from(games.outerjoin(table, table.c.game_id == games.c.game_id))
        .where(games.c.game_id == game_id)
        .order_by(table.c.seat)
    )
    with db.connect() as conn:
        rows = conn.execute(query).all()
    if not rows:
        raise _unknown(game_id)
    first = rows[0]
    return StandingsOut(
        game_id=game_id,
        game=first.game,
        version=first.version,
        status=first.status,
        standings=[_score(r._mapping) for r in rows if r.seat is not None],
    )


@router.get("/games/{game_id}/result", response_model=ResultOut, responses=ERRORS)
def result(game_id: Id, db: Db) -> ResultOut:
    """A finished game's final results; 409 while it is still running."""
    with db.connect() as conn:
        game = _game(conn, game_id)
        if game.status != "finished":
            raise ApiError(409, "game_not_finished", f"game {game_id} is still running")
        table = table_of(Result)
        rows = conn.execute(select(table).where(table.c.game_id == game_id).order_by(table.c.seat))
        facts = _seat_facts(conn, game_id)
        return ResultOut(
            game_id=game_id,
            game=game.game,
            finished_at=game.finished_at.isoformat(),
            duration_s=game.duration_s,
            winners=game.winners,
            results=[
                ResultRow.model_validate(
                    {
                        **r._mapping,
                        "breakdown": r.breakdown,
                        "tiebreak": r.tiebreak,
                        "facts": facts.get(r.seat, {}),
                    }
                )
                for r in rows
            ],
        )


@router.get("/leaderboard", response_model=list[LeaderOut], responses=ERRORS)
def leaderboard(
    db: Db,
    game: Annotated[
        str, Query(description="The game's registry name.", json_schema_extra={"enum": api.names()})
    ] = api.DEFAULT_GAME,
    kind: Literal["all", "human", "bot"] = "all",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[LeaderOut]:
    """Players of one game by openskill ordinal (skill at one game says little of another);
    bots are rated as players of their own, per level. 422 ``unsupported_game`` for a game
    that is not registered."""
    game_named(game)
    table = table_of(Rating)
    query = (
        select(table)
        .where(table.c.game == game)
        .order_by(table.c.ordinal.desc(), table.c.player)
        .limit(limit)
    )
    if kind != "all":
        query = query.where(table.c.player.startswith("bot:" if kind == "bot" else "player:"))
    with db.connect() as conn:
        return [
            LeaderOut(
                rank=i,
                player=r.player,
                ordinal=r.ordinal,
                mu=r.mu,
                sigma=r.sigma,
                games=r.games,
                wins=r.wins,
            )
            for i, r in enumerate(conn.execute(query), 1)
        ]


@router.get("/analytics/summary", response_model=SummaryOut, responses=ERRORS)
def summary(db: Db) -> SummaryOut:
    """What the dashboard draws, per game: games per hour, win rates by side and by seat
    kind (bot level), the mean score breakdown, the game's facts and decision latency."""
    results = table_of(Result)
    with db.connect() as conn:
        statuses = _statuses(conn)
        means = _means(conn)
        hours = _hours(conn)
        by_side = _win_rates(conn, results.c.side)
        by_kind = _win_rates(conn, results.c.seat_kind)
        breakdowns = _mean_breakdowns(conn)
        facts = _fact_stats(conn)
        latency = _latencies(conn)
    return SummaryOut(
        games={
            game: GameSummaryOut(
                games_finished=counts.get("finished", 0),
                games_running=counts.get("running", 0),
                mean_decisions_per_game=means.get(game, (0.0, 0.0))[0],
                mean_duration_s=means.get(game, (0.0, 0.0))[1],
                games_per_hour=hours.get(game, []),
                win_rate_by_side=by_side.get(game, {}),
                win_rate_by_seat_kind=by_kind.get(game, {}),
                mean_breakdown=breakdowns.get(game, {}),
                facts=facts.get(game, {}),
                decisions=latency.get(game, {}),
            )
            for game, counts in sorted(statuses.items())
        }
    )


@router.get("/analytics", response_class=FileResponse)
def dashboard() -> FileResponse:
    """The analytics page: filters and charts with intervals, drawn in the page from
    ``/analytics/figures`` and ``/analytics/compare`` (its script and style are the web
    client's static files: ``/static/js/analytics.js``, ``/static/analytics.css``)."""
    return FileResponse(PAGE, media_type="text/html")


def _game(conn: Connection, game_id: str) -> Any:
    table = table_of(ScoredGame)
    game = conn.execute(select(table).where(table.c.game_id == game_id)).first()
    if game is None:
        raise _unknown(game_id)
    return game


def _unknown(game_id: str) -> ApiError:
    return ApiError(404, "unknown_game", f"scoring knows no game {game_id} (yet)")


def _score(row: Any) -> StandingOut:
    """A standing or result row's score, its stored JSON breakdown read back."""
    return StandingOut(
        seat=row["seat"],
        player=row["player"],
        breakdown=row["breakdown"],
        total=row["total"],
        place=row["place"],
    )


def _seat_facts(conn: Connection, game_id: str) -> dict[int, dict[str, int]]:
    """Per seat of one game, its facts counted by kind."""
    facts = table_of(FactRow)
    query = (
        select(facts.c.seat, facts.c.kind, func.count())
        .where(facts.c.game_id == game_id)
        .group_by(facts.c.seat, facts.c.kind)
        .order_by(facts.c.seat, facts.c.kind)
    )
    out: dict[int, dict[str, int]] = defaultdict(dict)
    for seat, kind, count in conn.execute(query):
        out[seat][kind] = count
    return out


# --- the summary's parts, each keyed by game --------------------------------------------------


def _statuses(conn: Connection) -> dict[str, dict[str, int]]:
    """Per game, how many of its games are running and finished: the summary's sections."""
    games = table_of(ScoredGame)
    query = select(games.c.game, games.c.status, func.count()).group_by(
        games.c.game, games.c.status
    )
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for game, status, count in conn.execute(query):
        out[game][status] = count
    return out


def _means(conn: Connection) -> dict[str, tuple[float, float]]:
    """Per game, the mean decisions and duration of a finished game."""
    games = table_of(ScoredGame)
    query = (
        select(games.c.game, func.avg(games.c.decisions), func.avg(games.c.duration_s))
        .where(games.c.status == "finished")
        .group_by(games.c.game)
    )
    return {
        game: (round(float(decisions or 0), 1), round(float(duration or 0), 1))
        for game, decisions, duration in conn.execute(query)
    }


def _hours(conn: Connection) -> dict[str, list[tuple[str, int]]]:
    """Per game, games finished per hour (the last 72 hours with any)."""
    games = table_of(ScoredGame)
    query = select(games.c.game, games.c.finished_at).where(games.c.status == "finished")
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for game, at in conn.execute(query):
        counts[game][at.strftime("%Y-%m-%dT%H:00")] += 1
    return {game: sorted(hours.items())[-72:] for game, hours in counts.items()}


def _win_rates(conn: Connection, column: Any) -> dict[str, dict[str, float]]:
    """Per game, the share of seats in first place (a shared first place is a win for
    each), per value of ``column``."""
    results = table_of(Result)
    won = func.sum(cast(results.c.won, Integer))
    query = (
        select(results.c.game, column, func.count(), won)
        .group_by(results.c.game, column)
        .order_by(results.c.game, column)
    )
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for game, value, count, wins in conn.execute(query):
        out[game][value] = round(int(wins) / count, 4)
    return out


def _mean_breakdowns(conn: Connection) -> dict[str, dict[str, float]]:
    """Per game, the mean of each part of the final scores and of the total. The parts are
    JSON (each game names its own), so they are averaged here rather than in SQL."""
    results = table_of(Result)
    scores: dict[str, list[dict[str, int]]] = defaultdict(list)
    query = select(results.c.game, results.c.breakdown, results.c.total)
    for game, breakdown, total in conn.execute(query):
        scores[game].append({**breakdown, "total": total})
    return {game: _means_of(rows) for game, rows in scores.items()}


def _means_of(scores: Iterable[dict[str, int]]) -> dict[str, float]:
    """The mean of each key over ``scores``, keys in the order first seen."""
    sums: dict[str, float] = {}
    n = 0
    for score in scores:
        n += 1
        for part, value in score.items():
            sums[part] = sums.get(part, 0) + value
    return {part: round(total / n, 2) for part, total in sums.items()}


def _fact_stats(conn: Connection) -> dict[str, dict[str, list[FactStat]]]:
    """Per game and fact kind, over finished games: each subject's count, mean value and
    how often its seat won (the facts of The Age of Discovery: buildings bought and their
    owners' wins, regions discovered)."""
    facts, results = table_of(FactRow), table_of(Result)
    count = func.count()
    seat = (facts.c.game_id == results.c.game_id) & (facts.c.seat == results.c.seat)
    query = (
        select(
            results.c.game,
            facts.c.kind,
            facts.c.subject,
            count,
            func.avg(facts.c.value),
            func.sum(cast(results.c.won, Integer)),
        )
        .join_from(facts, results, seat)
        .group_by(results.c.game, facts.c.kind, facts.c.subject)
        .order_by(results.c.game, facts.c.kind, count.desc(), facts.c.subject)
    )
    out: dict[str, dict[str, list[FactStat]]] = defaultdict(lambda: defaultdict(list))
    for game, kind, subject, n, mean, wins in conn.execute(query):
        out[game][kind].append(
            FactStat(
                subject=subject,
                count=n,
                mean_value=round(float(mean), 2),
                owner_win_rate=round(int(wins) / n, 4),
            )
        )
    return out


def _latencies(conn: Connection) -> dict[str, dict[str, dict[str, float]]]:
    """Per game and seat kind, how many decisions and their mean latency."""
    decisions, games = table_of(Decision), table_of(ScoredGame)
    query = (
        select(games.c.game, decisions.c.seat_kind, func.count(), func.avg(decisions.c.latency_ms))
        .join_from(decisions, games, decisions.c.game_id == games.c.game_id)
        .group_by(games.c.game, decisions.c.seat_kind)
        .order_by(games.c.game, decisions.c.seat_kind)
    )
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for game, kind, n, mean in conn.execute(query):
        out[game][kind] = {"decisions": n, "mean_latency_ms": round(float(mean), 2)}
    return out
