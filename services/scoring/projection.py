"""Turning game events into scoring rows: the one code path of the live service and rebuilds.

A :class:`GameProgress` is what the projection knows of one game; it is a pure function of
the game's log up to ``version`` (so after a restart it is rebuilt by replaying the log
silently up to the version stored in SQL). :func:`advance` applies one event and, when given
a :class:`Rows`, records the rows that event produces; events at or below the applied version
are ignored, which makes every notification idempotent.

Ratings depend on the order in which games finish. That order is defined by the data: the
``finish_key`` is the ``recorded_at`` of the ``game_ended`` event, then the game id. Ratings
are the fold of the finished games in that order (:func:`rate`): a game that arrives after a
later-finishing one was rated (another partition read first) rewinds the later games and
rates them again after it, so the live service and a rebuild agree row for row.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from openskill.models import PlackettLuce
from sqlalchemy import Connection, delete, select

from shared.contracts import EventEnvelope
from shared.eventstore import GameCodec, to_event
from shared.games import age_of_discovery as aod

from .db import (
    BuildingStats,
    Decision,
    Purchase,
    Rating,
    RatingChange,
    Result,
    ScoredGame,
    Standing,
    table_of,
    upsert,
)

MODEL = PlackettLuce()
DECIDERS = {"player": "human", "bot": "bot", "fallback": "fallback"}


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def finish_key(finished_at: datetime, game_id: str) -> str:
    """Sorts like (finish time, game id): the order in which games are rated."""
    return f"{_utc(finished_at).strftime('%Y-%m-%dT%H:%M:%S.%f')}|{game_id}"


@dataclass(frozen=True)
class FinishedGame:
    """What rating a game needs: its place in the finish order, and who took which place."""

    key: str
    game_id: str
    finished_at: datetime
    places: tuple[tuple[str, int], ...]  # (player, place) per seat


@dataclass
class GameProgress:
    """One game as far as the projection has applied it, with what its rows need that the
    rules state does not keep (who plays each seat, purchases, decision times)."""

    game_id: str
    state: aod.GameState
    seats: list[str]  # per seat: human or bot:<level> (the lobby's seats hash)
    players: list[str]  # per seat: who is rated (bot:<level>, or player:<name>)
    created_at: datetime
    version: int = 0
    asked_at: datetime | None = None  # when the pending decision was asked for
    cause: str | None = None  # the command whose events came last
    decisions: int = 0
    discovered: list[int] = field(default_factory=list)
    purchases: list[tuple[int, str]] = field(default_factory=list)  # (seat, building)
    finished_at: datetime | None = None


@dataclass
class Rows:
    """The rows one transaction writes."""

    games: dict[str, dict[str, Any]] = field(default_factory=dict)
    standings: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    purchases: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    bought: Counter[str] = field(default_factory=Counter)
    owner_wins: Counter[str] = field(default_factory=Counter)
    finished: list[FinishedGame] = field(default_factory=list)
    events: int = 0


def seat_kinds(seats_hash: Mapping[bytes, bytes], players: int) -> list[str]:
    """Per seat: ``bot:<level>`` for a bot seat of the lobby, else ``human`` (a human who
    left is still the seat's player: the fallback only plays for them)."""
    kinds = []
    for seat in range(players):
        who = seats_hash.get(str(seat).encode(), b"").decode()
        kinds.append(who if who.startswith("bot:") else "human")
    return kinds


def start(
    codec: GameCodec, first: EventEnvelope, seats_hash: Mapping[bytes, bytes]
) -> GameProgress:
    """A game's progress before its first event (which must be ``game_created``)."""
    names = first.data["players"]
    kinds = seat_kinds(seats_hash, len(names))
    return GameProgress(
        game_id=first.game_id,
        state=codec.initial(first),
        seats=kinds,
        players=[k if k != "human" else f"player:{n}" for k, n in zip(kinds, names, strict=True)],
        created_at=first.recorded_at,
        discovered=[0] * len(names),
    )


def advance(p: GameProgress, event: EventEnvelope, rows: Rows | None) -> None:
    """Apply one event; with ``rows``, record what it produces (None: replaying silently)."""
    if event.version != p.version + 1:
        if event.version <= p.version:
            return
        raise ValueError(f"{p.game_id}: log jumps from {p.version} to {event.version}")
    state = p.state
    if event.causation_id != p.cause and event.actor in DECIDERS:
        _decision(p, event, rows)
    if event.causation_id != p.cause:
        p.asked_at = event.recorded_at
        p.cause = event.causation_id
    aod.apply(state, to_event(event))
    p.version = event.version
    data = event.data
    if event.type == "building_bought":
        p.purchases.append((data["seat"], data["building"]))
        if rows is not None:
            rows.purchases.append(
                {
                    "game_id": p.game_id,
                    "version": event.version,
                    "seat": data["seat"],
                    "building": data["building"],
                    "price": data["price"],
                    "turn": state.turn,
                }
            )
    elif event.type == "free_discovery" or (event.type == "expedition" and data["success"]):
        p.discovered[data["seat"]] += 1
    elif event.type == "game_ended":
        p.finished_at = event.recorded_at
        if rows is not None:
            _finish(p, rows)
    if rows is not None:
        rows.events += 1


def _decision(p: GameProgress, event: EventEnvelope, rows: Rows | None) -> None:
    """The first event of a seat's command: the decision it answered, and its latency (from
    the events before it, when the decision was asked for, to this command's events)."""
    p.decisions += 1
    if rows is None:
        return
    pending = aod.pending(p.state)
    seat = event.data.get("seat")
    decision = next((d for d in pending if d.seat == seat), pending[0] if pending else None)
    if decision is None:
        return
    kind = DECIDERS[event.actor or "player"]
    if kind == "bot" and p.seats[decision.seat].startswith("bot:"):
        kind = p.seats[decision.seat]  # its level, from the lobby's seats
    asked = p.asked_at or event.recorded_at
    rows.decisions.append(
        {
            "game_id": p.game_id,
            "version": event.version,
            "seat": decision.seat,
            "seat_kind": kind,
            "kind": decision.kind,
            "turn": p.state.turn,
            "latency_ms": (event.recorded_at - asked).total_seconds() * 1000,
        }
    )


def _finish(p: GameProgress, rows: Rows) -> None:
    """Final results, building statistics and the game's place in the rating order."""
    assert p.finished_at is not None
    scores = aod.score(p.state)
    nations = p.state.rules.ruleset.nations
    bought = Counter(seat for seat, _ in p.purchases)
    for row in scores:
        seat = row["seat"]
        rows.results.append(
            {
                "game_id": p.game_id,
                "seat": seat,
                "player": p.players[seat],
                "seat_kind": p.seats[seat],
                "nation": nations[seat].name,
                "place": row["place"],
                "won": row["place"] == 1,
                **{k: row[k] for k in ("colonies", "discoveries", "buildings", "economy")},
                "total": row["total"],
                "tiebreak": json.dumps(row["tiebreak"]),
                "buildings_bought": bought[seat],
                "discoveries_made": p.discovered[seat],
            }
        )
    winners = {row["seat"] for row in scores if row["place"] == 1}
    rows.bought.update(building for _, building in p.purchases)
    rows.owner_wins.update(building for seat, building in p.purchases if seat in winners)
    rows.finished.append(
        FinishedGame(
            finish_key(p.finished_at, p.game_id),
            p.game_id,
            p.finished_at,
            tuple((p.players[row["seat"]], row["place"]) for row in scores),
        )
    )


def snapshot_rows(p: GameProgress, rows: Rows) -> None:
    """The game's row and live standings at its current version (once per batch)."""
    state = p.state
    scores = aod.score(state)
    finished = p.finished_at is not None
    rows.games[p.game_id] = {
        "game_id": p.game_id,
        "version": p.version,
        "status": "finished" if finished else "running",
        "ruleset": state.rules.ruleset.name,
        "options": json.dumps(state.rules.options, sort_keys=True),
        "players": state.n,
        "turn": state.turn,
        "decisions": p.decisions,
        "buildings_bought": len(p.purchases),
        "discoveries": sum(p.discovered),
        "created_at": _utc(p.created_at),
        "finished_at": _utc(p.finished_at) if p.finished_at else None,
        "duration_s": (p.finished_at - p.created_at).total_seconds() if p.finished_at else None,
        "winners": json.dumps([r["seat"] for r in scores if r["place"] == 1]) if finished else None,
        "finish_key": finish_key(p.finished_at, p.game_id) if p.finished_at else None,
    }
    for row in scores:
        rows.standings[(p.game_id, row["seat"])] = {
            "game_id": p.game_id,
            "seat": row["seat"],
            "version": p.version,
            "player": p.players[row["seat"]],
            **{k: row[k] for k in ("colonies", "discoveries", "buildings", "economy", "total")},
            "place": row["place"],
        }


def write(conn: Connection, rows: Rows) -> None:
    """Write a batch of rows (one statement per table); ratings are :func:`rate`'s."""
    upsert(conn, table_of(ScoredGame), list(rows.games.values()))
    upsert(conn, table_of(Standing), list(rows.standings.values()))
    upsert(conn, table_of(Decision), rows.decisions)
    upsert(conn, table_of(Purchase), rows.purchases)
    upsert(conn, table_of(Result), rows.results)
    stats = [
        {"building": b, "bought": rows.bought[b], "owner_wins": rows.owner_wins[b]}
        for b in sorted(rows.bought)
    ]
    upsert(conn, table_of(BuildingStats), stats, add=("bought", "owner_wins"))


# --- ratings ------------------------------------------------------------------------------


def rate(conn: Connection, games: Sequence[FinishedGame]) -> None:
    """Rate newly finished games in finish order, first rewinding any game rated already
    that finished after the earliest of them (it is rated again after them)."""
    if not games:
        return
    history = table_of(RatingChange)
    first = min(g.key for g in games)
    later = conn.execute(
        select(history).where(history.c.finish_key > first).order_by(history.c.finish_key)
    ).all()
    ratings = _load_ratings(
        conn, {p for g in games for p, _ in g.places} | {r.player for r in later}
    )
    restored: set[str] = set()
    for change in later:  # earliest first: its "before" is the rating to go back to
        current = ratings[change.player]
        if change.player not in restored:
            current["mu"], current["sigma"] = change.mu_before, change.sigma_before
            restored.add(change.player)
        current["games"] -= 1
        current["wins"] -= int(change.won)
    replay = {c.game_id for c in later}
    if later:
        conn.execute(delete(history).where(history.c.finish_key > first))
    again = _finished_games(conn, sorted(replay - {g.game_id for g in games}))
    changes: list[dict[str, Any]] = []
    for game in sorted([*games, *again], key=lambda g: g.key):
        changes += _rate_one(ratings, game)
    upsert(conn, history, changes)
    upsert(conn, table_of(Rating), [r for r in ratings.values() if r["games"]])


def _rate_one(ratings: dict[str, dict[str, Any]], game: FinishedGame) -> list[dict[str, Any]]:
    """One game's openskill update. A player in several seats (two bots of one level) gets
    the mean of its seats' new ratings."""
    teams = [[MODEL.rating(ratings[p]["mu"], ratings[p]["sigma"])] for p, _ in game.places]
    new = MODEL.rate(teams, ranks=[float(place) for _, place in game.places])
    seats: dict[str, list[tuple[float, float, bool]]] = {}
    for (player, place), (team,) in zip(game.places, new, strict=True):
        seats.setdefault(player, []).append((team.mu, team.sigma, place == 1))
    changes = []
    for player, outcomes in sorted(seats.items()):
        current = ratings[player]
        mu = sum(o[0] for o in outcomes) / len(outcomes)
        sigma = sum(o[1] for o in outcomes) / len(outcomes)
        won = any(o[2] for o in outcomes)
        changes.append(
            {
                "finish_key": game.key,
                "player": player,
                "game_id": game.game_id,
                "won": won,
                "mu_before": current["mu"],
                "sigma_before": current["sigma"],
                "mu_after": mu,
                "sigma_after": sigma,
            }
        )
        current.update(
            mu=mu,
            sigma=sigma,
            ordinal=mu - 3 * sigma,
            games=current["games"] + 1,
            wins=current["wins"] + int(won),
            last_game=game.game_id,
            updated_at=_utc(game.finished_at),
        )
    return changes


def _load_ratings(conn: Connection, players: set[str]) -> dict[str, dict[str, Any]]:
    table = table_of(Rating)
    found = {
        row.player: dict(row._mapping)
        for row in conn.execute(select(table).where(table.c.player.in_(sorted(players))))
    }
    fresh = MODEL.rating()
    for player in players - found.keys():
        found[player] = {
            "player": player,
            "mu": fresh.mu,
            "sigma": fresh.sigma,
            "ordinal": fresh.mu - 3 * fresh.sigma,
            "games": 0,
            "wins": 0,
            "last_game": "",
            "updated_at": datetime(1970, 1, 1, tzinfo=UTC),
        }
    return found


def _finished_games(conn: Connection, game_ids: Sequence[str]) -> list[FinishedGame]:
    """Rated games read back from their results, to rate them again."""
    if not game_ids:
        return []
    games = table_of(ScoredGame)
    results = table_of(Result)
    places: dict[str, list[tuple[str, int]]] = {}
    query = (
        select(results.c.game_id, results.c.player, results.c.place)
        .where(results.c.game_id.in_(game_ids))
        .order_by(results.c.game_id, results.c.seat)
    )
    for row in conn.execute(query):
        places.setdefault(row.game_id, []).append((row.player, row.place))
    out = []
    for row in conn.execute(select(games).where(games.c.game_id.in_(game_ids))):
        finished_at = row.finished_at.replace(tzinfo=UTC)
        out.append(
            FinishedGame(row.finish_key, row.game_id, finished_at, tuple(places[row.game_id]))
        )
    return out
