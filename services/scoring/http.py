"""Scoring over HTTP: standings, results, leaderboards, analytics and a dashboard page.

The lobby's app includes this router. Everything is read from the scoring tables; nothing
here replays a log. The dashboard is one HTML page drawing inline SVG from
``/analytics/summary`` with a few lines of JavaScript: no external scripts, no network.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field
from sqlalchemy import Connection, Engine, Integer, cast, func, select

from shared.httpapi import ERRORS, ApiError, Id

from .db import BuildingStats, Decision, Rating, Result, ScoredGame, Standing, table_of

router = APIRouter(tags=["scoring"])


def get_db(request: Request) -> Engine:
    return request.app.state.lobby.db  # type: ignore[no-any-return]


Db = Annotated[Engine, Depends(get_db)]
PARTS = ("colonies", "discoveries", "buildings", "economy", "total")


class StandingOut(BaseModel):
    seat: int
    player: str
    colonies: int
    discoveries: int
    buildings: int
    economy: int
    total: int
    place: int


class StandingsOut(BaseModel):
    game_id: str
    version: int = Field(description="The game's version these standings are at.")
    status: str = Field(examples=["running", "finished"])
    standings: list[StandingOut]


class ResultRow(StandingOut):
    seat_kind: str = Field(examples=["human", "bot:greedy"])
    nation: str
    won: bool
    tiebreak: list[int] = Field(description="Last age's colony VP, money, goods.")
    buildings_bought: int
    discoveries_made: int


class ResultOut(BaseModel):
    game_id: str
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


class SummaryOut(BaseModel):
    games_finished: int
    games_running: int
    mean_decisions_per_game: float
    mean_duration_s: float
    games_per_hour: list[tuple[str, int]]
    win_rate_by_nation: dict[str, float]
    win_rate_by_seat_kind: dict[str, float]
    mean_breakdown: dict[str, float]
    buildings: list[dict[str, Any]] = Field(description="Most bought first, with owner win rate.")
    decisions: dict[str, dict[str, float]] = Field(description="Per seat kind: count, latency.")


@router.get("/games/{game_id}/standings", response_model=StandingsOut, responses=ERRORS)
def standings(game_id: Id, db: Db) -> StandingsOut:
    """The live score breakdown of every seat (places with the rulebook's tie-breakers)."""
    with db.connect() as conn:
        game = _game(conn, game_id)
        table = table_of(Standing)
        rows = conn.execute(select(table).where(table.c.game_id == game_id).order_by(table.c.seat))
        return StandingsOut(
            game_id=game_id,
            version=game.version,
            status=game.status,
            standings=[StandingOut.model_validate(r._mapping) for r in rows],
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
        return ResultOut(
            game_id=game_id,
            finished_at=game.finished_at.isoformat(),
            duration_s=game.duration_s,
            winners=json.loads(game.winners),
            results=[
                ResultRow.model_validate({**r._mapping, "tiebreak": json.loads(r.tiebreak)})
                for r in rows
            ],
        )


@router.get("/leaderboard", response_model=list[LeaderOut], responses=ERRORS)
def leaderboard(
    db: Db,
    kind: Literal["all", "human", "bot"] = "all",
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[LeaderOut]:
    """Players by openskill ordinal; bots are rated as players of their own, per level."""
    table = table_of(Rating)
    query = select(table).order_by(table.c.ordinal.desc(), table.c.player).limit(limit)
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
    """What the dashboard draws: games per hour, win rates by nation and by seat kind (bot
    level), the mean score breakdown, buildings bought and decision latency."""
    games, results = table_of(ScoredGame), table_of(Result)
    decisions, buildings = table_of(Decision), table_of(BuildingStats)
    with db.connect() as conn:
        statuses: dict[str, int] = dict(
            conn.execute(select(games.c.status, func.count()).group_by(games.c.status)).all()
        )
        finished = games.c.status == "finished"
        means = conn.execute(
            select(func.avg(games.c.decisions), func.avg(games.c.duration_s)).where(finished)
        ).one()
        hours = Counter(
            at.strftime("%Y-%m-%dT%H:00")
            for (at,) in conn.execute(select(games.c.finished_at).where(finished))
        )
        by_nation = _win_rates(conn, results.c.nation)
        by_kind = _win_rates(conn, results.c.seat_kind)
        breakdown = conn.execute(select(*(func.avg(results.c[p]) for p in PARTS))).one()
        bought = conn.execute(
            select(buildings).order_by(buildings.c.bought.desc(), buildings.c.building)
        ).all()
        latency = conn.execute(
            select(decisions.c.seat_kind, func.count(), func.avg(decisions.c.latency_ms))
            .group_by(decisions.c.seat_kind)
            .order_by(decisions.c.seat_kind)
        ).all()
    return SummaryOut(
        games_finished=statuses.get("finished", 0),
        games_running=statuses.get("running", 0),
        mean_decisions_per_game=round(float(means[0] or 0), 1),
        mean_duration_s=round(float(means[1] or 0), 1),
        games_per_hour=sorted(hours.items())[-72:],
        win_rate_by_nation=by_nation,
        win_rate_by_seat_kind=by_kind,
        mean_breakdown={p: round(float(v or 0), 2) for p, v in zip(PARTS, breakdown, strict=True)},
        buildings=[
            {
                "building": b.building,
                "bought": b.bought,
                "owner_win_rate": round(b.owner_wins / b.bought, 4) if b.bought else 0.0,
            }
            for b in bought
        ],
        decisions={
            kind: {"decisions": count, "mean_latency_ms": round(float(mean), 2)}
            for kind, count, mean in latency
        },
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


def _win_rates(conn: Connection, column: Any) -> dict[str, float]:
    """Share of seats in first place (a shared first place is a win for each), per value."""
    results = table_of(Result)
    won = func.sum(cast(results.c.won, Integer))
    query = select(column, func.count(), won).group_by(column).order_by(column)
    return {value: round(int(wins) / count, 4) for value, count, wins in conn.execute(query)}


DASHBOARD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Caravel analytics</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222;background:#fafafa}
h1{font-size:1.4em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:1.5em}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:1em}
.card h2{font-size:1em;margin:0 0 .5em} svg text{font-size:11px;fill:#333}
#totals{margin-bottom:1em}
</style></head>
<body><h1>Caravel analytics</h1><div id="totals">loading…</div><div class="grid">
<div class="card"><h2>Games finished per hour</h2><div id="hours"></div></div>
<div class="card"><h2>Win rate by nation</h2><div id="nations"></div></div>
<div class="card"><h2>Win rate by seat kind (bot level)</h2><div id="kinds"></div></div>
<div class="card"><h2>Mean score breakdown</h2><div id="breakdown"></div></div>
<div class="card"><h2>Most bought buildings</h2><div id="buildings"></div></div>
<div class="card"><h2>Mean decision latency (ms)</h2><div id="latency"></div></div>
</div>
<script>
const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
// Horizontal bars: one row per label, the value written after the bar.
function bars(id, pairs, format) {
  const box = document.getElementById(id);
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
fetch("analytics/summary").then(r => r.json()).then(s => {
  document.getElementById("totals").textContent =
    `${s.games_finished} games finished, ${s.games_running} running; ` +
    `${s.mean_decisions_per_game} decisions and ${s.mean_duration_s} s per game on average`;
  bars("hours", s.games_per_hour.map(([h, n]) => [h.replace("T", " "), n]), num);
  bars("nations", Object.entries(s.win_rate_by_nation), pct);
  bars("kinds", Object.entries(s.win_rate_by_seat_kind), pct);
  bars("breakdown", Object.entries(s.mean_breakdown), num);
  bars("buildings", s.buildings.slice(0, 12).map(b => [b.building, b.bought]), num);
  bars("latency", Object.entries(s.decisions).map(([k, d]) => [k, d.mean_latency_ms]), num);
});
</script></body></html>
"""
