"""Scoring over HTTP: standings, results, leaderboards, analytics and a dashboard page.

The composition root (services/server.py) puts this router beside the lobby's; it reads SQL
through the app's engine (``shared.httpapi.Db``). Everything is read from the scoring tables;
nothing here replays a log. Every game scores in its own terms, so a score is a total with the
game's breakdown of it as an object, ratings are per game, and the analytics summary has a
section per game, with the game's facts (its ``facts`` hook) counted by kind and subject. The
dashboard is one HTML page drawing inline SVG from ``/analytics/summary`` with a few lines of
JavaScript: no external scripts, no network.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from sqlalchemy import Connection, Integer, cast, func, select

from shared.games import api
from shared.httpapi import ERRORS, ApiError, Db, Id, game_named

from .db import Decision, FactRow, Rating, Result, ScoredGame, Standing, table_of

router = APIRouter(tags=["scoring"])
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
    """The live score of every seat (places with the game's tie-breakers)."""
    with db.connect() as conn:
        game = _game(conn, game_id)
        table = table_of(Standing)
        rows = conn.execute(select(table).where(table.c.game_id == game_id).order_by(table.c.seat))
        return StandingsOut(
            game_id=game_id,
            game=game.game,
            version=game.version,
            status=game.status,
            standings=[_score(r._mapping) for r in rows],
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
            winners=json.loads(game.winners),
            results=[
                ResultRow.model_validate(
                    {
                        **r._mapping,
                        "breakdown": json.loads(r.breakdown),
                        "tiebreak": json.loads(r.tiebreak),
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


@router.get("/analytics", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    """The analytics dashboard: charts drawn in the page from ``/analytics/summary``."""
    return HTMLResponse(DASHBOARD)


def _game(conn: Connection, game_id: str) -> Any:
    table = table_of(ScoredGame)
    game = conn.execute(select(table).where(table.c.game_id == game_id)).first()
    if game is None:
        raise ApiError(404, "unknown_game", f"scoring knows no game {game_id} (yet)")
    return game


def _score(row: Any) -> StandingOut:
    """A standing or result row's score, its stored JSON breakdown read back."""
    return StandingOut(
        seat=row["seat"],
        player=row["player"],
        breakdown=json.loads(row["breakdown"]),
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
        scores[game].append({**json.loads(breakdown), "total": total})
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


DASHBOARD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Caravel analytics</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}
h1{font-size:1.4em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:1.5em}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:1em}
h2{font-size:1.2em;margin:1.5em 0 .3em}
.card h3{font-size:1em;margin:0 0 .5em} svg text{font-size:11px;fill:#333}
</style></head>
<body><h1>Caravel analytics</h1><div id="games">loading…</div>
<script>
const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function html(name, text) {
  const e = document.createElement(name);
  if (text !== undefined) e.textContent = text;
  return e;
}
// A card of horizontal bars: one row per label, the value written after the bar.
function bars(grid, title, pairs, format) {
  const card = html("div"), box = html("div");
  card.className = "card";
  card.append(html("h3", title), box);
  grid.appendChild(card);
  if (!pairs.length) { box.textContent = "no data yet"; return; }
  const row = 20, left = 150, width = 420;
  const max = Math.max(...pairs.map(p => p[1]), 1e-9);
  const svg = el("svg", {width: width, height: row * pairs.length + 4});
  pairs.forEach(([label, value], i) => {
    const y = i * row + 2, w = (width - left - 60) * value / max;
    svg.appendChild(el("text", {x: 0, y: y + 14}, String(label).slice(0, 22)));
    svg.appendChild(el("rect", {x: left, y: y + 3, width: Math.max(w, 1), height: row - 6,
                                fill: "#3a7bd5"}));
    svg.appendChild(el("text", {x: left + w + 4, y: y + 14}, format(value)));
  });
  box.appendChild(svg);
}
const pct = v => (100 * v).toFixed(1) + "%";
const num = v => (Math.round(v * 100) / 100).toString();
const words = name => name.replaceAll("_", " ");
// One section per game: its totals, then its cards.
function section(root, game, s) {
  const grid = html("div");
  grid.className = "grid";
  root.append(html("h2", words(game)), html("p",
    `${s.games_finished} games finished, ${s.games_running} running; ` +
    `${s.mean_decisions_per_game} decisions and ${s.mean_duration_s} s per game on average`),
    grid);
  bars(grid, "Games finished per hour",
       s.games_per_hour.map(([h, n]) => [h.replace("T", " "), n]), num);
  bars(grid, "Win rate by side", Object.entries(s.win_rate_by_side), pct);
  bars(grid, "Win rate by seat kind (bot level)", Object.entries(s.win_rate_by_seat_kind), pct);
  bars(grid, "Mean score breakdown", Object.entries(s.mean_breakdown), num);
  for (const [kind, stats] of Object.entries(s.facts)) {
    bars(grid, `Most frequent: ${words(kind)}`,
         stats.slice(0, 12).map(f => [f.subject, f.count]), num);
    bars(grid, `Win rate of the seat: ${words(kind)}`,
         stats.slice(0, 12).map(f => [f.subject, f.owner_win_rate]), pct);
  }
  bars(grid, "Mean decision latency (ms)",
       Object.entries(s.decisions).map(([k, d]) => [k, d.mean_latency_ms]), num);
}
fetch("analytics/summary").then(r => r.json()).then(s => {
  const root = document.getElementById("games");
  root.textContent = Object.keys(s.games).length ? "" : "no games yet";
  for (const [game, part] of Object.entries(s.games)) section(root, game, part);
});
</script></body></html>
"""
