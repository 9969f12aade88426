"""Turning game events into scoring rows: the one code path of the live service and rebuilds.

A :class:`GameProgress` is what the projection knows of one game; it is a pure function of
the game's log up to ``version`` (so after a restart it is rebuilt by replaying the log
silently up to the version stored in SQL). :func:`advance` applies one event and, when given
a :class:`Rows`, records the rows that event produces; events at or below the applied version
are ignored, which makes every notification idempotent.

The projection knows no game: the log's ``game_created`` names it, the registry hands it
over, and the rows come from the protocol (``pending``, ``results``, ``is_over``) and the
game's ``facts`` hook, whose facts are the game-specific analytics.

Ratings are per game and depend on the order in which games finish. That order is defined
by the data: the ``finish_key`` is the ``recorded_at`` of the event that ended the game, then
the game id. Ratings are the fold of a game's finished games in that order (:func:`rate`): a
game that arrives after a later-finishing one was rated (another partition read first)
rewinds the later games and rates them again after it, so the live service and a rebuild
agree row for row.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from openskill.models import PlackettLuce
from sqlalchemy import Connection, delete, func, select

from shared.contracts import EventEnvelope, Seats, key_json
from shared.contracts.records import BOT_PREFIX, HUMAN
from shared.eventstore import GameCodec, to_event
from shared.games import api
from shared.games.api import analytics

from . import cells, flat
from .db import (
    Decision,
    FactRow,
    Rating,
    RatingChange,
    Result,
    ScoredGame,
    Standing,
    table_of,
    upsert,
)

MODEL = PlackettLuce()
SeatStanding = tuple[str, tuple[tuple[str, int], ...], int, int]
"""A seat's standing as compared between batches: player, breakdown (in its order), total,
place."""
DECIDERS = {"player": "human", "bot": "bot", "fallback": "fallback"}


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


KEY_TIME = "%Y-%m-%dT%H:%M:%S.%f"  # a finish key's time, UTC


def finish_key(finished_at: datetime, game_id: str) -> str:
    """Sorts like (finish time, game id): the order in which games are rated."""
    return f"{_utc(finished_at).strftime(KEY_TIME)}|{game_id}"


@dataclass(frozen=True)
class FinishedGame:
    """What rating a game needs: what was played, its place in the finish order, and who
    took which place."""

    game: str
    key: str
    game_id: str
    finished_at: datetime
    places: tuple[tuple[str, int], ...]  # (player, place) per seat


@dataclass
class GameProgress:
    """One game as far as the projection has applied it, with what its rows need that the
    rules state does not keep (who plays each seat, decision times)."""

    game_id: str
    game: api.AnyGame
    state: Any  # the game's own state type, driven through ``game`` only
    ruleset: str
    options: dict[str, Any]
    options_json: str  # ``options`` as the game's row holds them (keys sorted): made once
    seats: list[str]  # per seat: human or bot:<level> (the lobby's seats hash)
    players: list[str]  # per seat: who is rated (bot:<level>, or player:<name>)
    created_at: datetime
    version: int = 0
    asked_at: datetime | None = None  # when the pending decision was asked for
    cause: str | None = None  # the command whose events came last
    decisions: int = 0
    finished_at: datetime | None = None
    event_id: str | None = None  # the event at ``version``: tells a log that went back
    ruleset_hash: str = ""  # the compiled rules' content hash (shared.games.api.analytics)
    seat_facts: flat.SeatFacts = field(default_factory=dict)  # every fact so far, per seat
    imported: bool = False  # loaded by `caravel games import` (its seats hash says so)
    experiment: str | None = None  # a `caravel lab run --live` game's (its seats hash's)
    # Per seat, the standing last handed to SQL (:func:`snapshot_rows`): a seat's row is
    # written again only when it differs. Memory only: a game loaded again (a restart, the
    # cache's eviction, a failed batch's games are forgotten) starts empty and writes every
    # seat, so SQL never misses a change this thought was written.
    written: dict[int, SeatStanding] = field(default_factory=dict)


@dataclass
class Rows:
    """The rows one transaction writes."""

    games: dict[str, dict[str, Any]] = field(default_factory=dict)
    standings: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    flat_results: list[dict[str, Any]] = field(default_factory=list)
    seat_facts: list[dict[str, Any]] = field(default_factory=list)
    finished: list[FinishedGame] = field(default_factory=list)
    events: int = 0
    rebuilt: set[str] = field(default_factory=set)  # games whose old rows go first
    cells: bool = True  # sum the analytics cells of the games written (a rebuild: at the end)


def seat_kinds(seats: Seats, players: int) -> list[str]:
    """Per seat: ``bot:<level>`` for a bot seat of the lobby, else ``human`` (a human who
    left is still the seat's player: the fallback only plays for them)."""
    return [
        who if (who := seats.who(seat)).startswith(BOT_PREFIX) else HUMAN for seat in range(players)
    ]


def start(codec: GameCodec, first: EventEnvelope, seats: Seats) -> GameProgress:
    """A game's progress before its first event (which must be ``game_created``)."""
    data = first.data
    names = data["players"]
    kinds = seat_kinds(seats, len(names))
    state = codec.initial(first)
    game = api.of(state)
    return GameProgress(
        game_id=first.game_id,
        game=game,
        state=state,
        ruleset=data["ruleset"],
        options=data["options"],
        options_json=key_json(data["options"]),
        seats=kinds,
        players=[k if k != HUMAN else f"player:{n}" for k, n in zip(kinds, names, strict=True)],
        created_at=first.recorded_at,
        ruleset_hash=analytics.ruleset_hash(game.rules_named(data)),
        imported=seats.imported,
        experiment=seats.experiment,
    )


def advance(p: GameProgress, envelope: EventEnvelope, rows: Rows | None) -> None:
    """Apply one event; with ``rows``, record what it produces (None: replaying silently)."""
    if envelope.version != p.version + 1:
        if envelope.version <= p.version:
            return
        raise ValueError(f"{p.game_id}: log jumps from {p.version} to {envelope.version}")
    if envelope.causation_id != p.cause:
        if envelope.actor in DECIDERS:
            _decision(p, envelope, rows)
        p.asked_at = envelope.recorded_at
        p.cause = envelope.causation_id
    event = to_event(envelope, p.game)
    p.game.apply(p.state, event)
    p.version, p.event_id = envelope.version, envelope.event_id
    facts = p.game.facts(p.state, event)
    flat.count_facts(p.seat_facts, facts)
    if rows is not None:
        if facts:
            _facts(p, envelope.version, facts, rows)
        rows.events += 1
    if p.finished_at is None and p.game.is_over(p.state):
        p.finished_at = envelope.recorded_at
        if rows is not None:
            _finish(p, rows)


def _facts(p: GameProgress, version: int, facts: Sequence[api.Fact], rows: Rows) -> None:
    rows.facts.extend(
        {
            "game_id": p.game_id,
            "version": version,
            "seq": seq,
            "seat": fact.seat,
            "kind": fact.kind,
            "subject": fact.subject,
            "value": fact.value,
        }
        for seq, fact in enumerate(facts)
    )


def _decision(p: GameProgress, event: EventEnvelope, rows: Rows | None) -> None:
    """The first event of a seat's command: the decision it answered, and its latency (from
    the events before it, when the decision was asked for, to this command's events)."""
    p.decisions += 1
    if rows is None:
        return
    pending = p.game.pending(p.state)
    seat = event.data.get("seat")
    decision = next((d for d in pending if d.seat == seat), pending[0] if pending else None)
    if decision is None:
        return
    kind = DECIDERS[event.actor or "player"]
    if kind == "bot" and p.seats[decision.seat].startswith(BOT_PREFIX):
        kind = p.seats[decision.seat]  # its level, from the lobby's seats
    asked = p.asked_at or event.recorded_at
    rows.decisions.append(
        {
            "game_id": p.game_id,
            "version": event.version,
            "seat": decision.seat,
            "seat_kind": kind,
            "kind": decision.kind,
            "latency_ms": (event.recorded_at - asked).total_seconds() * 1000,
        }
    )


def _finish(p: GameProgress, rows: Rows) -> None:
    """Final results and the game's place in its rating order."""
    assert p.finished_at is not None
    results = p.game.results(p.state)
    for r in results:
        rows.results.append(
            {
                "game_id": p.game_id,
                "seat": r.seat,
                "game": p.game.name,
                "player": p.players[r.seat],
                "seat_kind": p.seats[r.seat],
                "side": r.side,
                "place": r.place,
                "won": r.place == 1,
                "breakdown": r.breakdown,
                "total": r.total,
                "tiebreak": list(r.tiebreak),
            }
        )
    _flat(p, results, rows)
    rows.finished.append(
        FinishedGame(
            p.game.name,
            finish_key(p.finished_at, p.game_id),
            p.game_id,
            p.finished_at,
            tuple((p.players[r.seat], r.place) for r in results),
        )
    )


def _flat(p: GameProgress, results: Sequence[api.SeatResult], rows: Rows) -> None:
    """The game's rows of the flat results table and its seat facts (under its experiment
    if `caravel lab run --live` played it)."""
    assert p.finished_at is not None
    flat_rows = flat.result_rows(
        game=p.game,
        game_id=p.game_id,
        ruleset=p.ruleset,
        ruleset_hash=p.ruleset_hash,
        options=p.options,
        seat_kinds=p.seats,
        players=p.players,
        positions=p.game.turn_positions(p.state),  # the order the game started with
        results=results,
        decisions=p.decisions,
        duration_s=(p.finished_at - p.created_at).total_seconds(),
        finished_at=_utc(p.finished_at),
        experiment=p.experiment,
        imported=p.imported,
    )
    rows.flat_results += flat_rows
    rows.seat_facts += flat.fact_rows(flat_rows, p.seat_facts)


def count_experiment(into: dict[str, dict[str, Any]], p: GameProgress, planned: int | None) -> None:
    """Count a ``caravel lab run --live`` game into its experiment's row, as a rebuild
    writes that row again when SQL lost it (:func:`.flat.restore_experiments`): the rules
    and levels its games were played with, from the start of the first to the end of the
    last, how many ended out of the run's plan (``planned``, its seats hash's; a hash
    without one: the games found), complete if every one did."""
    assert p.experiment is not None
    created = _utc(p.created_at)
    row = into.get(p.experiment)
    if row is None:
        row = into[p.experiment] = flat.experiment_row(
            name=p.experiment,
            game=p.game.name,
            ruleset=p.ruleset,
            ruleset_hash=p.ruleset_hash,
            options=p.options,
            levels=[kind.removeprefix(BOT_PREFIX) for kind in p.seats],
            planned=0,
            started_at=created,
        )
    row["started_at"] = min(row["started_at"], created)
    row["games_planned"] = planned if planned is not None else row["games_planned"] + 1
    if p.finished_at is not None:
        row["games_recorded"] += 1
    last = _utc(p.finished_at) if p.finished_at is not None else created
    row["finished_at"] = max(row["finished_at"] or last, last)
    done = row["games_recorded"] >= row["games_planned"]
    row["status"] = "complete" if done else "incomplete"


def snapshot_rows(p: GameProgress, rows: Rows) -> None:
    """The game's row at its current version, and the live standings of the seats whose
    standing changed since it was last written (once per batch). The standings' version is
    the game's row's: rewriting every seat's row for a new version was most of scoring's
    writes, and most batches change no seat's standing (issue 24)."""
    results = p.game.results(p.state)
    finished = p.finished_at is not None
    rows.games[p.game_id] = {
        "game_id": p.game_id,
        "game": p.game.name,
        "version": p.version,
        "event_id": p.event_id,
        "status": "finished" if finished else "running",
        "ruleset": p.ruleset,
        "options": p.options_json,
        "players": len(p.players),
        "decisions": p.decisions,
        "created_at": _utc(p.created_at),
        "finished_at": _utc(p.finished_at) if p.finished_at else None,
        "duration_s": (p.finished_at - p.created_at).total_seconds() if p.finished_at else None,
        "winners": [r.seat for r in results if r.place == 1] if finished else None,
        "finish_key": finish_key(p.finished_at, p.game_id) if p.finished_at else None,
    }
    for r in results:
        standing = (p.players[r.seat], tuple(r.breakdown.items()), r.total, r.place)
        if p.written.get(r.seat) == standing:
            continue
        p.written[r.seat] = standing
        rows.standings[(p.game_id, r.seat)] = {
            "game_id": p.game_id,
            "seat": r.seat,
            "game": p.game.name,
            "player": p.players[r.seat],
            "breakdown": r.breakdown,
            "total": r.total,
            "place": r.place,
        }


PER_GAME = (ScoredGame, Standing, Decision, FactRow, Result)


def write(conn: Connection, rows: Rows) -> None:
    """Write a batch of rows (one statement per table); ratings are :func:`rate`'s. The
    rows of games projected again from a log that went back are deleted first."""
    touched = cells.stored_groups(conn, sorted(rows.rebuilt))
    if rows.rebuilt:
        for table in [*(table_of(m) for m in PER_GAME), flat.RESULTS, flat.SEAT_FACTS]:
            conn.execute(delete(table).where(table.c.game_id.in_(sorted(rows.rebuilt))))
    upsert(conn, table_of(ScoredGame), list(rows.games.values()))
    upsert(conn, table_of(Standing), list(rows.standings.values()))
    upsert(conn, table_of(Decision), rows.decisions)
    upsert(conn, table_of(FactRow), rows.facts)
    upsert(conn, table_of(Result), rows.results)
    upsert(conn, flat.RESULTS, rows.flat_results)
    upsert(conn, flat.SEAT_FACTS, rows.seat_facts)
    if rows.cells:
        cells.refresh(conn, touched | cells.groups_of(rows.flat_results))


# --- ratings ------------------------------------------------------------------------------


def rate(conn: Connection, games: Sequence[FinishedGame], withdrawn: Collection[str] = ()) -> None:
    """Rate newly finished games, each game's players on their ratings at that game.
    ``withdrawn``: games projected again from a log that went back, whose end (if rated)
    the log no longer has: their rating changes are undone, as if they never finished."""
    undone = _rated(conn, withdrawn)
    for name in sorted({g.game for g in games} | undone.keys()):
        mine = [g for g in games if g.game == name]
        _rate_game(conn, name, mine, undone.get(name, []), set(withdrawn))


def _rated(conn: Connection, game_ids: Collection[str]) -> dict[str, list[str]]:
    """The finish keys of those of ``game_ids`` that were rated, by game name."""
    if not game_ids:
        return {}
    history = table_of(RatingChange)
    query = select(history.c.game, history.c.finish_key).where(
        history.c.game_id.in_(sorted(game_ids))
    )
    out: dict[str, list[str]] = {}
    for name, key in conn.execute(query.distinct()):
        out.setdefault(name, []).append(key)
    return out


def _rate_game(
    conn: Connection,
    name: str,
    games: Sequence[FinishedGame],
    undone: Sequence[str],
    withdrawn: set[str],
) -> None:
    """Rate newly finished games of the game ``name`` in finish order, first rewinding every
    game rated already that finished at or after the earliest of them or of the ``undone``
    finish keys (of ``withdrawn`` games): those are rated again after them, the withdrawn
    ones not (unless they are among ``games``, finished again)."""
    history = table_of(RatingChange)
    first = min([g.key for g in games] + list(undone))
    later_games = (history.c.game == name) & (history.c.finish_key >= first)
    later = conn.execute(select(history).where(later_games).order_by(history.c.finish_key)).all()
    ratings = _load_ratings(
        conn, name, {p for g in games for p, _ in g.places} | {r.player for r in later}
    )
    restored: set[str] = set()
    for change in later:  # earliest first: its "before" is the rating to go back to
        current = ratings[change.player]
        if change.player not in restored:
            current["mu"], current["sigma"] = change.mu_before, change.sigma_before
            current["ordinal"] = change.mu_before - 3 * change.sigma_before
            restored.add(change.player)
        current["games"] -= 1
        current["wins"] -= int(change.won)
    replay = {c.game_id for c in later} - {g.game_id for g in games} - withdrawn
    if later:
        conn.execute(delete(history).where(later_games))
    changes: list[dict[str, Any]] = []
    for finished in sorted([*games, *_finished_games(conn, sorted(replay))], key=lambda g: g.key):
        changes += _rate_one(ratings, finished)
    upsert(conn, history, changes)
    if gone := withdrawn - {g.game_id for g in games}:  # not finished again
        _last_games(conn, name, first, [r for r in ratings.values() if r["last_game"] in gone])
    _store_ratings(conn, name, ratings)


def _last_games(conn: Connection, name: str, before: str, ratings: list[dict[str, Any]]) -> None:
    """Point ratings whose last game was withdrawn at their newest game still rated (all
    rated after ``before`` were rated again), as a rebuild would have them."""
    if not ratings:
        return
    history = table_of(RatingChange)
    query = (
        select(history.c.player, func.max(history.c.finish_key))
        .where(history.c.game == name, history.c.finish_key < before)
        .where(history.c.player.in_(sorted(r["player"] for r in ratings)))
        .group_by(history.c.player)
    )
    newest: dict[str, str] = {player: key for player, key in conn.execute(query)}
    for rating in ratings:
        if key := newest.get(rating["player"]):
            moment, _, rating["last_game"] = key.partition("|")
            rating["updated_at"] = datetime.strptime(moment, KEY_TIME).replace(tzinfo=UTC)


def _store_ratings(conn: Connection, name: str, ratings: dict[str, dict[str, Any]]) -> None:
    """Write the ratings of players with games; delete those left with none (their only
    rated games were withdrawn)."""
    table = table_of(Rating)
    upsert(conn, table, [r for r in ratings.values() if r["games"]])
    unrated = sorted(p for p, r in ratings.items() if not r["games"])
    if unrated:
        conn.execute(delete(table).where(table.c.game == name, table.c.player.in_(unrated)))


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
                "game": game.game,
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


def _load_ratings(conn: Connection, name: str, players: set[str]) -> dict[str, dict[str, Any]]:
    """The ratings at the game ``name`` of ``players`` (fresh ones for newcomers)."""
    table = table_of(Rating)
    query = select(table).where(table.c.game == name, table.c.player.in_(sorted(players)))
    found = {row.player: dict(row._mapping) for row in conn.execute(query)}
    fresh = MODEL.rating()
    for player in players - found.keys():
        found[player] = {
            "game": name,
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
        game_places = tuple(places[row.game_id])
        out.append(FinishedGame(row.game, row.finish_key, row.game_id, finished_at, game_places))
    return out
